# store_bench's one-daemon table side by side with Redis (pool-buffer rows): on top the
# single calls, p50 latency of ours beside Redis' (SET, GET), lower is better; below the
# batches, keys/s of ours beside Redis' (MSET, EXISTS, MGET of the batch), higher is better.
# Both on log scales (4 KiB and 1 MiB differ by orders of magnitude); the label over each
# pair is the row's vs_redis ratio.
#
#   gnuplot -e "csv='store_bench.csv'; png='store_bench.png'" bench/plot_store_bench.gnuplot
#
# store_bench --csv F --png P runs it itself (make bench-store). csv and png default to
# store_bench.csv and store_bench.png in the current directory.
if (!exists("csv")) csv = 'store_bench.csv'
if (!exists("png")) png = 'store_bench.png'

set terminal pngcairo size 1400,900 noenhanced font ",9"
set output png
set datafile separator ','

# Columns: 1 op, 2 buffer, 3 form, 4 size, 5 threads, 8 ops_per_s, 10 p50_us,
# 15 redis_command, 16 redis_p50_us, 18 redis_ops_per_s, 19 ratio_to_redis.
size_text(s) = s >= 1048576 ? sprintf('%.0fMiB', s / 1048576.0) : sprintf('%.0fKiB', s / 1024.0)
# The row's name from its first columns (op, form, size, threads).
name(col) = sprintf('%s %s %s %dt', strcol(col), strcol(col + 2), size_text(column(col + 3)), \
                    int(column(col + 4)))
# Each panel's rows (pool buffers; single calls, or batches), picked by awk so that gnuplot
# numbers them 0, 1, ... (column 0) for the bars' positions.
rows(forms) = sprintf("< awk -F, 'NR > 1 && $2 == \"pool\" && $3 ~ /%s/' '%s'", forms, csv)
single_rows = rows('^(single|reread)$')
batch_rows = rows('^batch')
label(ratio_col, redis_col) = strcol(redis_col) ne '' ? sprintf('%.2fx', column(ratio_col)) : ''
top(a, b) = a > b ? a : b

set style fill solid 0.85 border -1
set boxwidth 0.38
set grid ytics
set logscale y
set key outside top center horizontal
set xtics rotate by 30 right
set offsets 0.6, 0.6, graph 0.12, 0  # room above the bars for their labels
ours_color = '#4a90d9'
redis_color = '#d62728'

set multiplot layout 2, 1 title sprintf("mooncake store vs Redis on this machine, same run (%s)", csv)

set title 'single calls: p50 latency (lower is better); label: ours / Redis'
set ylabel 'p50 (us)'
plot single_rows using ($0 - 0.2):10 with boxes lc rgb ours_color title 'mooncake (pool buffer)', \
     '' using ($0 + 0.2):(strcol(15) ne '' ? column(16) : NaN) with boxes lc rgb redis_color \
       title 'Redis (SET / GET, one blocking connection per thread)', \
     '' using 0:(top(column(10), column(16))):(label(19, 15)):xtic(name(1)) \
       with labels offset 0, 0.7 notitle

set title 'batches: keys/s (higher is better); label: ours / Redis'
set ylabel 'keys/s'
set format y '%.0s%c'
plot batch_rows using ($0 - 0.2):8 with boxes lc rgb ours_color title 'mooncake (pool buffer)', \
     '' using ($0 + 0.2):(strcol(15) ne '' ? column(18) : NaN) with boxes lc rgb redis_color \
       title 'Redis (MSET / EXISTS / MGET of the batch)', \
     '' using 0:(top(column(8), column(18))):(label(19, 15)):xtic(name(1)) \
       with labels offset 0, 0.7 notitle

unset multiplot
