# Bar chart of a master_bench CSV: keys/s per phase, single calls vs batch calls, with the
# project's 300k keys/s batch target drawn across.
#
#   gnuplot -e "csv='master_bench.csv'; png='master_bench.png'" bench/plot_master_bench.gnuplot
#
# csv and png default to master_bench.csv and master_bench.png in the current directory.
if (!exists("csv")) csv = 'master_bench.csv'
if (!exists("png")) png = 'master_bench.png'

set terminal pngcairo size 1100,620 noenhanced font ",10"
set output png
set datafile separator ','
set title sprintf("mooncake-master throughput (%s)", csv)
set ylabel 'keys/s'
set format y '%.0s%c'
set yrange [0:*]
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid ytics
set key top left
set xtics rotate by 25 right
set offsets 0.5, 0.5, graph 0.08, 0
set arrow from graph 0, first 300000 to graph 1, first 300000 nohead dt 2 lw 2 lc rgb '#c00000'
set label 'target: 300k keys/s (batch)' at graph 0.01, first 300000 offset 0, 0.7 tc rgb '#c00000'

color(form) = form eq 'single' ? 0x4a90d9 : (form eq 'batch' ? 0x2ca02c : 0x9467bd)

# Row 1 is the header. Column 7 is keys_per_s; the label on each bar is its rounded value.
plot csv every ::1 using 0:7:(color(strcol(2))):xtic(strcol(1).' '.strcol(2)) \
       with boxes lc rgb variable notitle, \
     '' every ::1 using 0:7:(sprintf('%.0fk', column(7) / 1000)) \
       with labels offset 0, 0.8 notitle
