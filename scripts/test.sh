#!/usr/bin/env bash
# `make test` after the build: the CTest suites and the fuzz smoke run (scripts/fuzz.sh
# --smoke: the fuzz harnesses built with clang, each replaying its corpus and fuzzing for a
# few seconds) side by side. The suites spend most of their time waiting on the processes
# they start, so the clang build of the harnesses uses cores that would otherwise idle; the
# suites are written to pass with a busy machine beside them.
#
#   scripts/test.sh BUILD_DIR FUZZ_DIR TEST_JOBS FUZZ_SECONDS [CTEST_ARG...]
#
# The fuzz run's output goes to FUZZ_DIR/smoke.log and is printed once the suites are done.
# Exit status: 0 when both passed; otherwise the failing part's.
set -uo pipefail
cd "$(dirname "$0")/.."
build_dir=$1 fuzz_dir=$2 test_jobs=$3 fuzz_seconds=$4
shift 4

mkdir -p "$fuzz_dir"
smoke_log=$fuzz_dir/smoke.log
bash scripts/fuzz.sh --build-dir "$fuzz_dir" --seconds "$fuzz_seconds" --smoke \
  > "$smoke_log" 2>&1 &
fuzz_pid=$!
# The fuzz run must not outlive an interrupted `make test`.
trap 'kill $fuzz_pid 2> /dev/null' INT TERM

echo "test.sh: the fuzz smoke run builds and runs beside the suites (log: $smoke_log)"
(cd "$build_dir" && ctest "$@" -j "$test_jobs")
suites=$?

echo "test.sh: the suites are done; waiting for the fuzz smoke run"
wait $fuzz_pid
fuzzed=$?
cat "$smoke_log"
if [ $suites -ne 0 ]; then
  echo "test.sh: the CTest suites failed (status $suites)" >&2
  exit $suites
fi
if [ $fuzzed -ne 0 ]; then
  echo "test.sh: the fuzz smoke run failed (status $fuzzed): $smoke_log" >&2
  exit $fuzzed
fi
