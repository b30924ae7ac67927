#!/usr/bin/env bash
# A/B benchmark for the no-regression rule: the working tree (B) against a baseline commit (A).
#   Scripts/ab.sh BASE [ROUNDS] [bench names…]
#     BASE    the baseline commit, by its hash
#     ROUNDS  interleaved rounds, 5 unless given (the rule asks for at least 5)
#     names   benchmarks as Scripts/bench.sh names them; all of bench.sh's list unless given
#   Scripts/ab.sh f9d9bd9                      every benchmark, 5 rounds
#   Scripts/ab.sh f9d9bd9 7 switch yield spawn just these, 7 rounds
#
# Both sides are built in release, each in its own scratch copy under $AB_DIR (default
# /tmp/swift-coroutines-ab; kept between runs, so later builds are incremental): A from BASE's
# sources, B from the working tree's (uncommitted and untracked files included), and both with the
# CURRENT Sources/coroutines-bench, so that both measure the same benchmark code. The builds run
# one after the other, with -j 2.
#
# Then, for each round and each benchmark, A runs, then B (A B A B …), each benchmark in its own
# process pinned to one core as bench.sh pins it (taskset -c $AB_CPU, default 0), with
# COROUTINES_QUIET=1. Every median of every row is printed, then per row the median of A's
# medians, the median of B's, B/A and the verdict: within 3 % (time: B/A ≤ 1.03; throughput,
# requests/s: B/A ≥ 0.97) or, for the bytes-per-coroutine rows (parked), at most +64 B.
# The "swift: …" rows are the Swift-concurrency peers, and the "hw: …" rows the hardware floors
# (pingpong-threads' cache-line ping-pong): the same code on both sides, so their verdicts
# measure the machine's noise; AB_NO_PEER=1 skips them. Exits 1 if one of our rows
# regressed. Raw output goes to $AB_DIR/runs.log; the load average is printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
base=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "ab.sh: not a commit: $1" >&2; exit 2; }
shift
rounds=5
if [ $# -ge 1 ] && [[ $1 =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
[ "$rounds" -ge 1 ] || { echo "ab.sh: ROUNDS must be at least 1" >&2; exit 2; }
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  # The list of Scripts/bench.sh.
  names=(switch yield generator generator-in-coroutine spawn skynet promise pingpong pingpong-threads
         buffered select sieve actor parked parked-1m echo)
fi
cpu=${AB_CPU:-0}
work=${AB_DIR:-/tmp/swift-coroutines-ab}
mkdir -p "$work"

# sync_into SRC DST: makes DST's files (its .build aside) equal to SRC's, rewriting only the files
# that differ, so that SwiftPM's incremental build sees only real changes.
sync_into() {
  local src=$1 dst=$2 f
  mkdir -p "$dst"
  (cd "$src" && find . -type f) | while IFS= read -r f; do
    cmp -s "$src/$f" "$dst/$f" || { mkdir -p "$(dirname "$dst/$f")"; cp "$src/$f" "$dst/$f"; }
  done
  (cd "$dst" && find . -path ./.build -prune -o -type f -print) | while IFS= read -r f; do
    [ -e "$src/$f" ] || rm -f "$dst/$f"
  done
}

# Stage A: BASE's tree. Stage B: the working tree's files (tracked and untracked, not ignored).
rm -rf "$work/stage-A" "$work/stage-B"
mkdir -p "$work/stage-A" "$work/stage-B"
git archive "$base" | tar -x -C "$work/stage-A"
git ls-files -z -c -o --exclude-standard | while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue   # tracked but deleted in the working tree
  mkdir -p "$work/stage-B/$(dirname "$f")"
  cp "$f" "$work/stage-B/$f"
done
# The same benchmark sources on both sides: the working tree's.
for side in A B; do
  rm -rf "$work/stage-$side/Sources/coroutines-bench"
  cp -R "$repo/Sources/coroutines-bench" "$work/stage-$side/Sources/coroutines-bench"
done

head_desc="$(git rev-parse --short HEAD)"
[ -z "$(git status --porcelain)" ] || head_desc="$head_desc + uncommitted changes"
echo "A: $(git log -1 --format='%h %s' "$base" | cut -c1-100)"
echo "B: working tree at $head_desc"
echo "benchmark sources: the working tree's Sources/coroutines-bench, on both sides"

for side in A B; do
  sync_into "$work/stage-$side" "$work/$side"
  echo "building $side in $work/$side (release, -j 2)…"
  if ! (cd "$work/$side" && swift build -c release -j 2 -Xswiftc -DAB_COMPARISON --product coroutines-bench) > "$work/build-$side.log" 2>&1; then
    cat "$work/build-$side.log"; echo "ab.sh: the $side build failed" >&2; exit 1
  fi
  tail -n 1 "$work/build-$side.log"
done

export COROUTINES_QUIET=1
[ -z "${AB_NO_PEER:-}" ] || export COROUTINES_BENCH_NO_PEER=1
records="$work/records.tsv"   # side, round, benchmark, row, unit, median
: > "$records"
: > "$work/runs.log"
echo
echo "## runs: $rounds rounds of ${names[*]}, A then B, pinned (taskset -c $cpu)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
started=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  for n in "${names[@]}"; do
    for side in A B; do
      out=$(taskset -c "$cpu" "$work/$side/.build/release/coroutines-bench" "$n" 2>&1) || {
        echo "$out"; echo "ab.sh: $side failed on $n (round $r)" >&2; exit 1; }
      printf '%s\n' "# $side round $r: $n" "$out" >> "$work/runs.log"
      row=""
      while IFS= read -r line; do
        # "<row, padded>  n=9  median=12.3 ns/op  (12.1…12.9)"; a second figure of the row above
        # (echo's p99 latency) has no row name and no n=.
        if [[ $line =~ ^(.*[^ ])\ +n=[0-9]+\ +median=([^ ]+)\ (.*[^ ])\ +\( ]]; then
          row=${BASH_REMATCH[1]}; median=${BASH_REMATCH[2]}; unit=${BASH_REMATCH[3]}
        elif [[ $line =~ ^\ +median=([^ ]+)\ (.*[^ ])\ +\( ]] && [ -n "$row" ]; then
          median=${BASH_REMATCH[1]}; unit=${BASH_REMATCH[2]}
        else
          continue
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$side" "$r" "$n" "$row" "$unit" "$median" >> "$records"
        printf '[%s round %d] %-10s %-34s %10s %s\n' "$side" "$r" "$n" "$row" "$median" "$unit"
      done <<< "$out"
    done
  done
done

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); runs took $(( ($(date +%s) - started) / 60 )) min"
echo
echo "## medians per row (A = $(git rev-parse --short "$base"), B = $head_desc)"
awk -F'\t' '
  function median(list,   v, k, i, j, t) {
    k = split(list, v, " ")
    for (i = 2; i <= k; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return k % 2 ? v[(k + 1) / 2] + 0 : (v[k / 2] + v[k / 2 + 1]) / 2
  }
  {
    key = $3 " | " $4 " [" $5 "]"
    if (!(key in seen)) { seen[key] = 1; order[++rows] = key; unit[key] = $5; peer[key] = ($4 ~ /^(swift|hw): /) }
    vals[key, $1] = vals[key, $1] (vals[key, $1] == "" ? "" : " ") $6
  }
  END {
    for (i = 1; i <= rows; i++) {
      key = order[i]; a = median(vals[key, "A"]); b = median(vals[key, "B"])
      if (unit[key] ~ /^bytes\//) {
        verdict = (b - a <= 64) ? "ok (≤ +64 B)" : "REGRESSED (> +64 B)"
        change = sprintf("%+.0f B", b - a)
      } else if (unit[key] ~ /requests\/s/) {
        verdict = (b / a >= 0.97) ? "ok (within 3 %)" : "REGRESSED (> 3 % fewer)"
        change = sprintf("B/A %.3f", b / a)
      } else {
        verdict = (b / a <= 1.03) ? "ok (within 3 %)" : "REGRESSED (> 3 % slower)"
        change = sprintf("B/A %.3f", b / a)
      }
      if (verdict ~ /^REGRESSED/) { if (peer[key]) peersRegressed++; else oursRegressed++ }
      printf "%s\n  A: %-44s median %s\n  B: %-44s median %s   %s  %s\n", key, vals[key, "A"], a, vals[key, "B"], b, change, verdict
      summary[i] = sprintf("%-62s %10s %10s  %-12s %s", substr(key, 1, 62), a, b, change, verdict)
    }
    printf "\n## summary\n%-62s %10s %10s  %-12s %s\n", "row [unit]", "A", "B", "change", "verdict"
    for (i = 1; i <= rows; i++) print summary[i]
    printf "\nregressed: %d of our rows, %d peer and floor rows (same code on both sides: noise)\n", oursRegressed, peersRegressed
    exit oursRegressed > 0
  }' "$records"
