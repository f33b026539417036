# Memory use over time from an eviction_bench CSV: the pool's usage (% of its capacity) in
# each phase, without and with batch_is_exist polling alongside the writer, the master's
# high watermark drawn across, and on the right axis how much had been written so far
# (times the memory).
#
#   gnuplot -e "csv='eviction_bench.csv'; png='eviction_bench.png'" bench/plot_eviction_bench.gnuplot
#
# eviction_bench runs it itself when gnuplot is installed. csv and png default to
# eviction_bench.csv and eviction_bench.png in the current directory.
if (!exists("csv")) csv = 'eviction_bench.csv'
if (!exists("png")) png = 'eviction_bench.png'

set terminal pngcairo size 1000,560 noenhanced font ",10"
set output png
set datafile separator ','

# Columns: 1 phase, 2 t_s, 5 used_pct, 6 watermark_pct, 8 written_x_memory.
stats csv every ::1 using 6 nooutput name 'WM'
watermark = WM_max

set title sprintf("mooncake memory use while writing, with and without existence polling (%s)", csv)
set xlabel 'seconds since the phase started'
set ylabel 'pool used (% of capacity)'
set y2label 'written so far (x the memory)'
set yrange [0:105]
set y2range [0:*]
set ytics nomirror
set y2tics
set grid ytics
set key bottom right
set style textbox opaque noborder
set arrow from graph 0, first watermark to graph 1, first watermark nohead front dt 2 lw 2 lc rgb '#c00000'
set label sprintf('high watermark %.0f%%', watermark) at graph 0.01, first watermark \
    offset 0, 0.8 front boxed tc rgb '#c00000'

in(phase, col) = strcol(1) eq phase ? column(col) : NaN

plot csv every ::1 using 2:(in('no-checks', 5)) with lines lw 2 lc rgb '#4a90d9' \
       title 'used, no checks', \
     '' every ::1 using 2:(in('with-checks', 5)) with lines lw 2 lc rgb '#2ca02c' \
       title 'used, with batch_is_exist polling', \
     '' every ::1 using 2:(in('no-checks', 8)) axes x1y2 with lines dt 3 lc rgb '#4a90d9' \
       title 'written, no checks', \
     '' every ::1 using 2:(in('with-checks', 8)) axes x1y2 with lines dt 3 lc rgb '#2ca02c' \
       title 'written, with checks'
