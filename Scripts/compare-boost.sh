#!/usr/bin/env bash
# Times the runtime's x86_64 context switch (Sources/CCoroutines/context_x86_64.S) against
# Boost.Context's jump_fcontext in one C program (Scripts/boost/switch_timing.c: three timed loops
# of 10^7 switches per variant, every loop printed; see that file for the variants). Boost comes
# from Debian's libboost-context-dev, installed here when missing (as root): a comparison only,
# never a build dependency. Pinned to one CPU (COMPARE_CPU, default 0).
#
# Target (issue "one core"): the slowest loop of each variant the runtime uses — "ccoro_switch,
# one call site", "ccoro_switch_jump" and (for generators) "ccoro_switch_swap" — at most 1.3 × Boost's slowest
# loop, with flags equal.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(uname -m)" = x86_64 ] || { echo "compare-boost: x86_64 only"; exit 1; }
if [ ! -e /usr/include/boost/context/detail/fcontext.hpp ]; then
  [ "$(id -u)" = 0 ] || { echo "compare-boost: needs libboost-context-dev (apt-get install)"; exit 1; }
  apt-get install -y libboost-context-dev >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y libboost-context-dev >/dev/null; }
fi
out=/tmp/coroutines-compare-boost
mkdir -p "$out"
clang -O2 Scripts/boost/switch_timing.c Sources/CCoroutines/context_x86_64.S -lboost_context -o "$out/switch_timing"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "condition     variant                          loop 1  loop 2  loop 3"
taskset -c "${COMPARE_CPU:-0}" "$out/switch_timing" | tee "$out/result.txt"
boost=$(awk '/^flags equal/ && /boost/ {print $NF}' "$out/result.txt")
for v in "ccoro_switch, one call site" "ccoro_switch_jump" "ccoro_switch_swap"; do
  ours=$(grep "^flags equal" "$out/result.txt" | grep -F "$v " | awk '{print $NF}')
  awk -v o="$ours" -v b="$boost" -v n="$v" 'BEGIN { printf "%-30s slowest loop %.2f ns = %.2f × Boost slowest %.2f ns (target ≤ 1.3)\n", n, o, o / b, b }'
done
