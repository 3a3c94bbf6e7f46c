set terminal pngcairo noenhanced size 900,480 font ',10'
set output 'openclose.png'
set title 'Open/close scaling: 128 threads, total seconds'
set logscale x 2
set logscale y
set xlabel 'file sets'
set ylabel 's'
set grid
set key top left
plot for [i=2:6] 'openclose.dat' using 1:i with linespoints lw 2 title columnhead(i)
