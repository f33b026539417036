#!/bin/bash
# bench/store_bench still works, its Redis side included (issue 18, part bench): a tiny run
# (4 KiB and 1 MiB, a few hundred operations) against a spawned master and daemon and a
# redis-server it starts itself. Checks that every pool row carries the Redis figure of
# its operation (SET, GET, MSET/EXISTS/MGET of 32 and 128 keys) and a ratio, that the
# batch exist rows are there, that each of the eight goal lines is printed with a figure and
# PASS or MISS (not "not measured"), that the CSV has the Redis and memcpy columns and one
# line per row, that the hops baseline's master round trips cost more than the daemon alone and the floor lines
# follow the goals, that the PNG is written when gnuplot is installed, and that no
# redis-server of the run is left behind. Then make demo's --digest form: its plain lines,
# each beside a baseline, and no goal verdicts. Skipped (77) without redis-server.
# Usage: store_bench_smoke_test.sh BUILD_DIR
set -u
build=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
redis=$(command -v redis-server || true)
if [ -z "$redis" ]; then
  echo "SKIP: redis-server is not installed (Debian package redis-server; scripts/install-deps.sh)"
  exit 77
fi
tmp=$(mktemp -d /tmp/mc-store-bench-smoke-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
png_flags=()
if command -v gnuplot > /dev/null; then png_flags=(--png "$tmp/store_bench.png"); fi

"$build/bench/store_bench" --build_dir "$build" --sizes 4KB,1MB --threads 2 --max_ops 256 \
  --bytes_per_phase 8MB --segment_size 256MB --pool_size 64MB --lease_ms 1000 \
  --csv "$tmp/store_bench.csv" "${png_flags[@]}" > "$tmp/out.txt" 2> "$tmp/err.txt" ||
  fail "store_bench exited $?: $(tail -5 "$tmp/err.txt")"
cat "$tmp/out.txt"

grep -q '^redis: redis-server .* --save "" --appendonly no' "$tmp/out.txt" ||
  fail "no line saying which redis-server ran, persistence off"
# op buffer form size unit thr ... redis redis_p50 redis_op/s vs_redis (17 fields)
expect_row() {  # op form size-unit threads redis-command
  awk -v op="$1" -v form="$2" -v unit="$3" -v thr="$4" -v cmd="$5" '
    NF == 17 && $1 == op && $2 == "pool" && $3 == form && $5 == unit && $6 == thr &&
    $14 == cmd && $15 + 0 > 0 && $16 + 0 > 0 && $17 ~ /^[0-9.]+x$/ { found = 1 }
    END { exit !found }' "$tmp/out.txt" ||
    fail "no pool row '$1 $2 $3 $4 threads' with a Redis $5 figure and a ratio"
}
for unit in KiB MiB; do
  for thr in 1 2; do
    expect_row put single "$unit" "$thr" SET
    expect_row get single "$unit" "$thr" GET
  done
  expect_row get reread "$unit" 1 GET
done
for batch in 32 128; do
  expect_row put "batch$batch" KiB 1 "MSET$batch"
  expect_row exist "batch$batch" KiB 1 "EXISTS$batch"
  expect_row get "batch$batch" KiB 1 "MGET$batch"
done

for goal in "4 KiB put p50 <= 1.5x Redis SET p50" "4 KiB puts, 2 threads >= 30k/s" \
            "4 KiB first get p50 <= Redis GET p50" "4 KiB re-read p50 <= 2x Unix-socket" \
            "batch128 x 4 KiB get >= 1M keys/s" "batch128 x 4 KiB exist >= 1M keys/s" \
            "batch128 x 4 KiB put >= 500k keys/s" "1 MiB get_into >= 0.8x memcpy cold->warm"; do
  line=$(grep -F "  $goal" "$tmp/out.txt") || fail "no goal line '$goal'"
  echo "$line" | grep -Eq ' (PASS|MISS)$' || fail "goal line without PASS/MISS: $line"
  echo "$line" | grep -q 'not measured' && fail "goal not measured: $line"
done

# The floor of the design's hops: three medians, those with master round trips dearer
# than the client <-> daemon one alone (a relay that skipped its master round trips would
# give three alike; one against two round trips is within a loaded machine's noise), and
# the two floor lines that set them beside the latency goals.
hops=$(grep '^hops: client -> daemon -> master with no work' "$tmp/out.txt") ||
  fail "no hops line"
echo "${hops#*p50): }" | grep -oE '[0-9.]+ us' | awk '
    { v[++n] = $1 }
    END { exit !(n == 3 && v[1] > 0 && v[2] > v[1] && v[3] > v[1]) }' ||
  fail "hops line without master round trips dearer than the daemon alone: $hops"
for floor in "4 KiB first get" "4 KiB put"; do
  grep -Eq "^  $floor +[0-9.]+ us = [0-9.]+ us of hops \+ -?[0-9.]+ us of work; goal <= [0-9.]+ us\$" \
    "$tmp/out.txt" || fail "no floor line for $floor"
done

header=$(head -1 "$tmp/store_bench.csv")
for column in op buffer form size threads ops_per_s p50_us memcpy_cold_warm_gb_per_s \
              memcpy_cold_cold_gb_per_s ratio_to_memcpy redis_command redis_p50_us \
              redis_ops_per_s ratio_to_redis; do
  echo ",$header," | grep -q ",$column," || fail "CSV has no column $column: $header"
done
rows=$(awk 'NF == 17 && ($2 == "pool" || $2 == "plain")' "$tmp/out.txt" | wc -l)
lines=$(($(wc -l < "$tmp/store_bench.csv") - 1))
[ "$rows" -gt 0 ] && [ "$rows" -eq "$lines" ] || fail "$rows table rows but $lines CSV lines"
grep -q '^put,pool,single,4096,1,.*,SET,' "$tmp/store_bench.csv" || fail "no CSV row of put single 4 KiB with SET"
if [ ${#png_flags[@]} -gt 0 ]; then
  [ -s "$tmp/store_bench.png" ] || fail "no PNG written"
fi
# The server ran in a temp dir of its own (--dir), removed when it stopped.
dir=$(sed -n 's/^redis: .* --dir \([^ ]*\) .*/\1/p' "$tmp/out.txt")
[ -n "$dir" ] || fail "the redis line names no --dir"
[ ! -e "$dir" ] || fail "redis' temp dir $dir was left behind"
# make demo's form (--digest): each figure in a plain line beside its same-run baseline, and
# no table and no goal verdicts, which are make bench's.
"$build/bench/store_bench" --build_dir "$build" --digest --sizes 4KB,1MB --threads 2 \
  --max_ops 256 --bytes_per_phase 8MB --segment_size 256MB --pool_size 64MB --lease_ms 1000 \
  > "$tmp/digest.txt" 2> "$tmp/digest-err.txt" ||
  fail "store_bench --digest exited $?: $(tail -5 "$tmp/digest-err.txt")"
cat "$tmp/digest.txt"
grep -Eq '^  4\.0 KiB +put +[0-9.]+ us +Redis SET [0-9.]+ us$' "$tmp/digest.txt" ||
  fail "digest: no 4 KiB put line beside Redis SET"
grep -Eq '^ +get +[0-9.]+ us +Redis GET [0-9.]+ us' "$tmp/digest.txt" ||
  fail "digest: no get line beside Redis GET"
grep -Eq '^ +re-read +[0-9.]+ us +a Unix-socket round trip [0-9.]+ us' "$tmp/digest.txt" ||
  fail "digest: no re-read line beside the Unix-socket round trip"
grep -Eq '^ +128 keys +put [0-9]+, exist [0-9]+, get [0-9]+ keys/s +Redis MSET [0-9]+, EXISTS [0-9]+, MGET [0-9]+$' \
  "$tmp/digest.txt" || fail "digest: no 128-key batch line beside Redis"
grep -Eq '^ +get_into +[0-9.]+ GB/s = [0-9]+% of memcpy \([0-9.]+ GB/s' "$tmp/digest.txt" ||
  fail "digest: no 1 MiB get_into line beside memcpy"
if grep -Eq 'PASS|MISS|goal|NOT met|^op +buffer' "$tmp/digest.txt"; then
  fail "digest: a goal verdict or the table: $(grep -E 'PASS|MISS|goal|NOT met|^op +buffer' "$tmp/digest.txt")"
fi
echo "PASS"
