# Failover times and the cost of HA from a failover_bench CSV: left, per failover, the
# seconds from the leader's SIGKILL until another master answered LEADER, until a put went
# through another master and until one went through a daemon (the 5 s aim drawn across);
# right, master batch put throughput per round, single master against the HA leader.
#
#   gnuplot -e "csv='failover_bench.csv'; png='failover_bench.png'" bench/plot_failover_bench.gnuplot
#
# failover_bench runs it itself when gnuplot is installed. csv and png default to
# failover_bench.csv and failover_bench.png in the current directory.
if (!exists("csv")) csv = 'failover_bench.csv'
if (!exists("png")) png = 'failover_bench.png'

set terminal pngcairo size 1200,520 noenhanced font ",10"
set output png
set datafile separator ','
set multiplot layout 1,2 title sprintf("mooncake failover (%s)", csv)

# Columns: 1 kind, 2 round, 3 elected_s, 4 master_put_s, 5 daemon_put_s, 6 setup,
# 7 keys_per_s.
failover(col) = strcol(1) eq 'failover' ? column(col) : NaN
throughput(setup) = strcol(1) eq 'throughput' && strcol(6) eq setup ? column(7) : NaN

set title 'seconds from the leader SIGKILL until'
set xlabel 'failover'
set ylabel 'seconds'
set yrange [0:*]
set grid ytics
set key top left
set arrow 1 from graph 0, first 5 to graph 1, first 5 nohead dt 2 lw 2 lc rgb '#c00000'
plot csv every ::1 using 2:(failover(3)) with linespoints pt 7 lc rgb '#999999' \
       title 'another master answers LEADER', \
     '' every ::1 using 2:(failover(4)) with linespoints pt 5 lc rgb '#4a90d9' \
       title 'a put through another master', \
     '' every ::1 using 2:(failover(5)) with linespoints pt 9 lc rgb '#2ca02c' \
       title 'a put through a daemon'
unset arrow 1

set title 'master batch put throughput'
set xlabel 'round'
set ylabel 'keys/s'
set style fill solid 0.8
set boxwidth 0.35
plot csv every ::1 using ($2 - 0.2):(throughput('single')) with boxes lc rgb '#4a90d9' \
       title 'single master', \
     '' every ::1 using ($2 + 0.2):(throughput('ha')) with boxes lc rgb '#2ca02c' \
       title 'HA leader, standbys following'
unset multiplot
