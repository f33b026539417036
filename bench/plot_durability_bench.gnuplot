# Bar chart of a durability_bench CSV: batch-put keys/s per durability mode (the median of
# its runs as a bar, each run as a dot), with the aim for strict mode (0.7 x disabled)
# drawn across.
#
#   gnuplot -e "csv='durability_bench.csv'; png='durability_bench.png'" bench/plot_durability_bench.gnuplot
#
# durability_bench runs it itself when gnuplot is installed. csv and png default to
# durability_bench.csv and durability_bench.png in the current directory.
if (!exists("csv")) csv = 'durability_bench.csv'
if (!exists("png")) png = 'durability_bench.png'

set terminal pngcairo size 900,560 noenhanced font ",10"
set output png
set datafile separator ','

# Columns: 1 section, 2 mode, 4 form, 8 keys_per_s. The modes in the order they get stronger.
x(mode) = mode eq 'off' ? 0 : (mode eq 'disabled' ? 1 : (mode eq 'relaxed' ? 2 : 3))
batch_median(mode) = strcol(1) eq 'median' && strcol(4) eq 'batch' && strcol(2) eq mode ? column(8) : NaN
stats csv every ::1 using (batch_median('disabled')) nooutput name 'DISABLED'
aim = 0.7 * DISABLED_max

set title sprintf("mooncake-master batch puts per durability mode (%s)", csv)
set ylabel 'keys/s'
set format y '%.0s%c'
set yrange [0:*]
set xrange [-0.6:3.6]
set xtics ('off' 0, 'snapshots, oplog disabled' 1, 'snapshots, oplog relaxed' 2, 'snapshots, oplog strict' 3)
set style fill solid 0.85 border -1
set boxwidth 0.6
set grid ytics
set key top right
set style textbox opaque noborder
set arrow from graph 0, first aim to graph 1, first aim nohead front dt 2 lw 2 lc rgb '#c00000'
set label sprintf('aim for strict: 0.7 x disabled = %.0fk', aim / 1000) \
    at graph 0.99, first aim right offset 0, 0.8 front boxed tc rgb '#c00000'

is_median(form) = strcol(1) eq 'median' && strcol(4) eq form
is_run(form) = strcol(1) eq 'throughput' && strcol(4) eq form

plot csv every ::1 using (is_median('batch') ? x(strcol(2)) : NaN):8 \
       with boxes lc rgb '#2ca02c' title 'median of the runs', \
     '' every ::1 using (is_median('batch') ? x(strcol(2)) : NaN):8:(sprintf('%.0fk', column(8) / 1000)) \
       with labels offset 0, 0.8 notitle, \
     '' every ::1 using (is_run('batch') ? x(strcol(2)) + 0.12 : NaN):8 \
       with points pt 7 ps 0.8 lc rgb '#404040' title 'one run'
