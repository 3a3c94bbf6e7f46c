set terminal pngcairo noenhanced size 900,480 font ',10'
set output 'checkpoint.png'
set title 'Temp-table checkpoint: flush time per round (ms)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set ylabel 'ms'
set grid ytics
set yrange [0:*]
set xtics rotate by -20
plot 'checkpoint.dat' using 2:xtic(1) title 'average', '' using 3 title 'worst'
