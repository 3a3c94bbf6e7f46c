set terminal pngcairo noenhanced size 900,480 font ',10'
set output 'raw.png'
set title 'Raw matrix: throughput relative to the raw store (log scale)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set logscale y
set yrange [0.05:*]
set ylabel 'ratio to raw store'
set grid ytics
set key outside right top
set xtics rotate by -30
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2
set key autotitle columnhead
plot for [i=2:7] 'raw.dat' using i:xtic(1)
