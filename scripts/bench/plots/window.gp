# scripts/bench/plots/window.gp: compare.sh's plot of a burst under a
# limit.  Each of dir/limit-{weir,postfix,nullmailer}.win holds "seconds
# since that system's first send, sends the upstream accepted in the last
# `per` seconds", every 0.1 s.  Set from the command line:
#   gnuplot -e "dir='scripts/bench/plots'; out='window.svg'; limit=20; per=10; burst=200; npeak=171" window.gp
set terminal svg size 720,400 dynamic font "sans,11"
set output out
set title sprintf("Burst of %d messages, limit %d per %d s: sends in the last %d s at the upstream", burst, limit, per, per)
set xlabel "seconds since the first send"
set ylabel sprintf("sends in the last %d s", per)
set yrange [0:limit * 3]
set key top right
set grid
plot limit with lines dt 2 lw 2 lc rgb "black" title sprintf("limit (%d)", limit), \
  dir."/limit-weir.win" with lines lw 2 lc rgb "#1f77b4" title "weir", \
  dir."/limit-postfix.win" with lines lw 2 lc rgb "#2ca02c" title "Postfix (rate delay 1 s)", \
  dir."/limit-nullmailer.win" with lines lw 2 lc rgb "#d62728" title sprintf("nullmailer (peak %d, off the scale)", npeak)
