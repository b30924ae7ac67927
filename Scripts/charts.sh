#!/usr/bin/env bash
# Draws the benchmark charts of docs/Performance.md (and the README's) as SVG files under
# docs/charts/, with gnuplot, from the output of a benchmark run:
#   Scripts/charts.sh FILE   FILE holds what Scripts/bench.sh and then Scripts/compare-go.sh
#                            printed (docs/charts/results-amd-epyc.txt is such a file)
#   Scripts/charts.sh        runs both scripts first, every benchmark (run it on a quiet machine),
#                            saves their output as docs/charts/results-<date>.txt and draws from it
# Charts:
#   ours-vs-peers.svg           pinned to one core: swift-coroutines, the fastest Swift-concurrency
#                               peer and Go 1.19 (GOMAXPROCS=1) per workload, log scale
#   ours-vs-peers-unpinned.svg  the same unpinned (2 cores); Go with GOMAXPROCS=2 where measured
#   skynet-pool.svg             skynet on the default pool against one scheduler, Go 1.19
#                               (GOMAXPROCS=2) and Swift's TaskGroup
# The rows are read by name: each benchmark's own row (the names of Sources/coroutines-bench),
# then its peers; `swift: …` rows are Swift-concurrency peers (the fastest one is drawn), `… (one
# scheduler)` rows are ours on one scheduler, `go: …` rows Go's. Rows that compare-go.sh prints
# for coroutines-bench itself are not used: the tables take ours and the Swift peers from bench.sh.
# gnuplot comes from Debian: run as root, the script installs `gnuplot-nox` when it is missing.
set -euo pipefail
if [ $# -eq 1 ] && [ -r "$1" ]; then   # a path relative to where the script was called from
  given=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
fi
cd "$(dirname "$0")/.."
root=$(pwd)
out=docs/charts

if ! command -v gnuplot >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "gnuplot is not installed: apt-get install gnuplot-nox"
    apt-get install -y gnuplot-nox >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y gnuplot-nox >/dev/null; }
  fi
  command -v gnuplot >/dev/null || { echo "gnuplot is not installed (apt-get install gnuplot-nox, as root)"; exit 1; }
fi

if [ $# -gt 1 ]; then
  echo "usage: Scripts/charts.sh [results-file]"; exit 2
elif [ $# -eq 1 ]; then
  [ -n "${given:-}" ] || { echo "charts: cannot read $1"; exit 1; }
  results=$given
else
  results=$out/results-$(date +%Y-%m-%d).txt
  mkdir -p "$out"
  cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -1)
  {
    echo "# Scripts/bench.sh, then Scripts/compare-go.sh, run by Scripts/charts.sh on $(date +%Y-%m-%d)"
    echo "# cpu: ${cpu:-unknown CPU} ($(nproc) CPUs)"
  } >"$results"
  Scripts/bench.sh 2>&1 | tee -a "$results"
  Scripts/compare-go.sh 2>&1 | tee -a "$results"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One line per (section, benchmark): section key ours unit best-swift-peer one-scheduler go.
# Sections: pinned, unpinned, pool (bench.sh); gopinned, gounpinned (compare-go.sh). A missing
# figure is "?".
awk -v work="$work" '
function ours_key(name) {
  # The row names of our workloads (Sources/coroutines-bench), by benchmark.
  if (name == "switch (asm ccoro_switch)") return "switch"
  if (name == "yield (Coroutine.yield)") return "yield"
  if (name == "generator (next)") return "generator"
  if (name == "spawn (launch 100k)") return "spawn"
  if (name == "skynet (1M leaves)") return "skynet"
  if (name == "promise (fulfil → resume)") return "promise"
  if (name == "pingpong (one scheduler)") return "pingpong"
  if (name == "pingpong (two schedulers)") return "pingpong-threads"
  if (name == "buffered (capacity 64)") return "buffered"
  if (name == "select (2-way receive)") return "select"
  if (name == "sieve (2,000 primes)") return "sieve"
  if (name == "actor (send → reply awaited)") return "actor"
  if (name == "skynet-pool (default pool)") return "skynet-pool"
  if (name == "skew (default pool)") return "skew"
  if (name ~ /^[a-z]/ && name !~ /^(swift|hw|go):/ && name !~ /\(one scheduler\)$/) return "other"
  return ""
}
function median(line) {
  if (!match(line, /median=[0-9.]+/)) return "?"
  return substr(line, RSTART + 7, RLENGTH - 7)
}
function unit(line,    rest) {
  match(line, /median=[0-9.]+ /)
  rest = substr(line, RSTART + RLENGTH)
  sub(/  \(.*$/, "", rest)
  return rest
}
function remember(s, k) {
  if (!((s, k) in seen)) { seen[s, k] = 1; order[++n] = s SUBSEP k }
}
/^# cpu:/ { cpu = $0; sub(/^# cpu:[[:space:]]*/, "", cpu); next }
/^## pinned/ { section = "pinned"; current = ""; next }
/^## unpinned only/ { section = "pool"; current = ""; next }
/^## unpinned/ { section = "unpinned"; current = ""; next }
/^--- pinned/ { section = "gopinned"; current = ""; next }
/^--- unpinned/ { section = "gounpinned"; current = ""; next }
/^go: / {
  if (section != "gopinned" && section != "gounpinned") next
  value = median($0)
  if (value + 0 >= 100) value = sprintf("%d", value + 0.5)   # as coroutines-bench prints figures
  go[section, $2] = value
  next
}
/ n=[0-9]+  median=/ {
  if (section != "pinned" && section != "unpinned" && section != "pool") next
  name = substr($0, 1, index($0, " n=") - 1)
  sub(/[[:space:]]+$/, "", name)
  key = ours_key(name)
  if (key == "other") { current = ""; next }        # a benchmark the charts do not draw
  if (key != "") {
    current = key
    remember(section, key)
    ours[section, key] = median($0)
    units[section, key] = unit($0)
    next
  }
  if (current == "") next
  value = median($0)
  if (name ~ /^swift: /) {
    if (!((section, current) in best) || value + 0 < best[section, current] + 0) best[section, current] = value
  } else if (name ~ /\(one scheduler\)$/) {
    one[section, current] = value
  }
}
END {
  print (cpu == "" ? "unknown CPU" : cpu) > (work "/cpu")
  for (i = 1; i <= n; i++) {
    split(order[i], p, SUBSEP)
    s = p[1]; k = p[2]
    g = "?"
    gokey = (k == "skynet-pool") ? "skynet" : k
    if (s == "pinned" && (("gopinned", gokey) in go)) g = go["gopinned", gokey]
    if ((s == "unpinned" || s == "pool") && (("gounpinned", gokey) in go)) g = go["gounpinned", gokey]
    b = ((s, k) in best) ? best[s, k] : "?"
    o = ((s, k) in one) ? one[s, k] : "?"
    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, k, ours[s, k], units[s, k], b, o, g > (work "/rows")
  }
}' "$results"

[ -s "$work/rows" ] || { echo "charts: no benchmark rows found in $results"; exit 1; }
cpu=$(cat "$work/cpu")

# Per-workload data for the two comparison charts: label (name and unit), ours, best Swift peer,
# Go. Only time rows (smaller is better); skynet-pool and skew have a chart or table of their own.
for section in pinned unpinned; do
  awk -F'\t' -v s="$section" '$1 == s && $2 != "skynet-pool" && $2 != "skew" && $4 ~ /^(ns|ms)/ {
    split($4, u, "/")
    name = $2
    sub(/-/, "-\\n", name)                          # pingpong-\nthreads: narrow enough for its bars
    printf "\"%s\\n(%s)\"\t%s\t%s\t%s\n", name, u[1], $3, $5, $7
  }' "$work/rows" >"$work/$section.dat"
done
# Colours as integers (0xRRGGBB): ours #1f6fb4, ours on one scheduler #8fb8de, Go #3a9e4a,
# Swift #e08a1e, as in the comparison charts.
awk -F'\t' '$1 == "pool" && $2 == "skynet-pool" {
  printf "\"swift-coroutines,\\ndefault pool\"\t%s\t%d\n", $3, 2060212
  printf "\"swift-coroutines,\\none scheduler\"\t%s\t%d\n", $6, 9418974
  printf "\"Go 1.19,\\nGOMAXPROCS=2\"\t%s\t%d\n", $7, 3841610
  printf "\"Swift TaskGroup\"\t%s\t%d\n", $5, 14715422
}' "$work/rows" >"$work/skynet-pool.dat"

mkdir -p "$out"
drawn=()

# A clustered bar chart on a log scale with each bar's value above it. gnuplot runs in the
# scratch directory, so that the SVG names the data file without a temporary path.
comparison() { # data-file (in $work) svg-file title go-title
  cat >"$work/plot.gp" <<EOF
set terminal svg size 1100,540 dynamic noenhanced font "sans,12" background rgb "white"
set output "$root/$2"
set title "$3"
set datafile separator "\t"
set datafile missing "?"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.95
set logscale y
set yrange [1:*]
set format y "%.0s%c"
set ylabel "median, in the unit under each workload (log scale; lower is faster)"
set grid ytics lc rgb "#dddddd"
set xtics scale 0 font ",11"
set bmargin 4
set key top left
set offsets 0.5, 0.5, 0, 0
plot "$1" using 2:xtic(1) title "swift-coroutines" lc rgb "#1f6fb4", \
     "" using 3 title "fastest Swift-concurrency peer" lc rgb "#e08a1e", \
     "" using 4 title "$4" lc rgb "#3a9e4a", \
     "" using (\$0 - 0.25):2:(strcol(2)) with labels offset 0,0.6 font ",9" notitle, \
     "" using (\$0):3:(strcol(3)) with labels offset 0,0.6 font ",9" notitle, \
     "" using (\$0 + 0.25):4:(strcol(4)) with labels offset 0,0.6 font ",9" notitle
EOF
  (cd "$work" && gnuplot plot.gp)
  drawn+=("$2")
}

if [ -s "$work/pinned.dat" ]; then
  comparison pinned.dat "$out/ours-vs-peers.svg" \
    "swift-coroutines against Swift concurrency and Go, pinned to one core ($cpu)" "Go 1.19, GOMAXPROCS=1"
fi
if [ -s "$work/unpinned.dat" ]; then
  comparison unpinned.dat "$out/ours-vs-peers-unpinned.svg" \
    "swift-coroutines against Swift concurrency and Go, unpinned ($cpu)" "Go 1.19, GOMAXPROCS=2"
fi

if [ -s "$work/skynet-pool.dat" ]; then
  cat >"$work/plot.gp" <<EOF
set terminal svg size 720,420 dynamic noenhanced font "sans,12" background rgb "white"
set output "$root/$out/skynet-pool.svg"
set title "skynet, 1,111,111 coroutines or tasks, unpinned ($cpu)"
set datafile separator "\t"
set datafile missing "?"
set style fill solid 0.85 border -1
set boxwidth 0.6
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
set ylabel "median, ms (lower is faster)"
set grid ytics lc rgb "#dddddd"
set xtics scale 0
set bmargin 4
unset key
plot "skynet-pool.dat" using 0:2:3:xtic(1) with boxes lc rgb variable, \
     "" using 0:2:(strcol(2)." ms") with labels offset 0,0.8 notitle
EOF
  (cd "$work" && gnuplot plot.gp)
  drawn+=("$out/skynet-pool.svg")
fi

[ ${#drawn[@]} -gt 0 ] || { echo "charts: nothing to draw from $results"; exit 1; }
printf 'charts: drew %s from %s\n' "${drawn[*]}" "$results"
