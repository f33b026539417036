#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang in their own build directory and runs
# each for a bounded time (docs/fuzzing.md). `make fuzz` and `make test` (--smoke) call it.
#
#   scripts/fuzz.sh [--build-dir DIR] [--seconds N] [--smoke] [--write-seeds] [HARNESS...]
#
# Every harness runs over three corpora: DIR/corpus/<harness> (its working corpus, which
# grows from run to run and receives what libFuzzer finds), fuzz/corpus/<harness> (the
# committed seeds and regression inputs) and DIR/seeds/<harness> (the seeds the generator
# writes from the current encoders). --smoke replaces the working corpus by an empty
# temporary one, so that `make test` replays exactly the committed and generated inputs,
# then fuzzes for N seconds. Crash, leak, timeout and out-of-memory inputs are written to
# DIR/artifacts/<harness>/; a harness's whole output to DIR/logs/<harness>.log.
# --write-seeds writes the generator's seeds into fuzz/corpus/ instead (make fuzz-seeds).
# Exit status: 0 when no harness failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD

build_dir=build-fuzz
seconds=${FUZZ_SECONDS:-120}
smoke=0
write_seeds=0
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    --write-seeds) write_seeds=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done

# What each harness needs its inputs to reach: -max_len (bytes) for each.
declare -A max_len=(
  [uds_frame_fuzzer]=131072        # a batch of uds::kMaxBatch entries and more
  [transfer_header_fuzzer]=2048    # a HELLO payload of kMaxHelloPayload and more
  [master_rpc_fuzzer]=8192
  [flags_fuzzer]=4096
  [state_records_fuzzer]=8192
  [oplog_recovery_fuzzer]=16384
  [snapshot_codec_fuzzer]=16384
  [snapshot_restore_fuzzer]=16384
  [ssd_meta_fuzzer]=16384          # two .meta files of a few dozen records
  [admin_http_fuzzer]=10240        # headers past AdminHttpServer::kMaxHeaderBytes
)
all=(uds_frame_fuzzer transfer_header_fuzzer master_rpc_fuzzer flags_fuzzer
     state_records_fuzzer oplog_recovery_fuzzer snapshot_codec_fuzzer snapshot_restore_fuzzer
     ssd_meta_fuzzer admin_http_fuzzer)
[ ${#harnesses[@]} -eq 0 ] && harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [ -n "${max_len[$h]:-}" ] || { echo "fuzz.sh: no harness $h (${all[*]})" >&2; exit 2; }
done

# ---- build ----
# ccache only where it is installed (install-deps.sh does not install it); without it the
# launcher is cleared, in case the build directory was configured on a machine with it.
launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # ccache cannot know that the objects depend on the ignore list's contents.
  export CCACHE_EXTRAFILES=$source_dir/fuzz/sanitizer_ignorelist.txt
fi
build_start=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DMC_FUZZ=ON -DCMAKE_BUILD_TYPE=Fuzz \
  "${launcher[@]}" > /dev/null
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target fuzzers -- --no-print-directory \
  > "$build_dir/build.log" 2>&1 || { cat "$build_dir/build.log"; exit 1; }
build_seconds=$(( $(date +%s) - build_start ))

if [ $write_seeds -eq 1 ]; then
  for h in "${all[@]}"; do rm -f fuzz/corpus/$h/seed-*; done
  "$build_dir/fuzz/fuzz_seeds" fuzz/corpus
  echo "fuzz.sh: seeds written to fuzz/corpus/"
  exit 0
fi

rm -rf "$build_dir/seeds"
"$build_dir/fuzz/fuzz_seeds" "$build_dir/seeds"
# The committed seeds should be what the generator writes now (a format changed if not).
for h in "${all[@]}"; do
  fresh=$(cd "$build_dir/seeds/$h" && ls seed-* | sort)
  committed=$(cd "fuzz/corpus/$h" 2>/dev/null && ls seed-* 2>/dev/null | sort || true)
  same=1
  [ "$fresh" = "$committed" ] || same=0
  for f in $fresh; do
    [ $same -eq 1 ] && ! cmp -s "$build_dir/seeds/$h/$f" "fuzz/corpus/$h/$f" && same=0
  done
  if [ $same -eq 0 ]; then
    echo "fuzz.sh: note: the seeds in fuzz/corpus/$h are not what the generator writes now;" \
         "run 'make fuzz-seeds' and commit them (the fresh ones are fuzzed meanwhile)"
  fi
done

# ---- run ----
mkdir -p "$build_dir/logs"
smoke_dir=""
if [ $smoke -eq 1 ]; then
  smoke_dir=$(mktemp -d "${TMPDIR:-/tmp}/mc-fuzz-smoke.XXXXXX")
  trap 'rm -rf "$smoke_dir"' EXIT
fi
total_runs=0
failed=0
printf '%-26s %12s %9s %8s  %s\n' harness executions exec/s corpus result
for h in "${harnesses[@]}"; do
  work="$build_dir/corpus/$h"
  [ $smoke -eq 1 ] && work="$smoke_dir/$h"
  artifacts="$build_dir/artifacts/$h"
  mkdir -p "$work" "$artifacts" "fuzz/corpus/$h"
  dict=()
  [ -f "fuzz/dict/$h.dict" ] && dict=(-dict="fuzz/dict/$h.dict")
  log="$build_dir/logs/$h.log"
  status=0
  # No input of these sizes has a reason to make one allocation over 1 GiB (-malloc_limit_mb):
  # one that does is reported like a crash, before the process grows to the RSS limit.
  "$build_dir/fuzz/$h" -max_total_time="$seconds" -max_len="${max_len[$h]}" -timeout=30 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" \
    "$work" "fuzz/corpus/$h" "$build_dir/seeds/$h" > "$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(ls "$work" | wc -l)
  if [ $status -eq 0 ]; then
    result=ok
  else
    failed=$((failed + 1))
    artifact=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    result="FAILED (exit $status): ${artifact:-see $log}"
  fi
  total_runs=$((total_runs + ${runs:-0}))
  printf '%-26s %12s %9s %8s  %s\n' "$h" "${runs:-?}" "${rate:-?}" "$corpus" "$result"
done
echo "fuzz.sh: $total_runs executions in ${#harnesses[@]} harnesses (${seconds}s each," \
     "build ${build_seconds}s); crashes (timeouts, out-of-memory): $failed;" \
     "inputs that fail go to $build_dir/artifacts/"
[ $failed -eq 0 ]
