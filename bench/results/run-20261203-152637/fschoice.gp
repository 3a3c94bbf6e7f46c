set terminal pngcairo noenhanced size 900,480 font ',10'
set output 'fschoice.png'
set title 'Import load: elapsed seconds, lower is better'
set style fill solid 0.8 border -1
set boxwidth 0.7
set ylabel 's'
set grid ytics
set yrange [0:*]
set xtics rotate by -20
plot 'fschoice.dat' using 0:2:xtic(1) with boxes notitle
