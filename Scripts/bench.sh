#!/usr/bin/env bash
# Runs coroutines-bench in release: pinned to one core (the headline figures: a scheduler is one
# thread, and Swift's cooperative pool then has one thread too), then unpinned. Each benchmark
# runs in its own process: in one process, earlier benchmarks leave heap and stack-pool state that
# changes later figures.
#   Scripts/bench.sh                 every benchmark
#   Scripts/bench.sh spawn promise   just these
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product coroutines-bench
export COROUTINES_QUIET=1
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(switch yield generator generator-in-coroutine spawn skynet promise pingpong pingpong-threads
         buffered select sieve actor parked parked-1m echo)
fi
echo "## pinned (taskset -c 0)"
for n in "${names[@]}"; do taskset -c 0 .build/release/coroutines-bench "$n"; done
echo
echo "## unpinned"
for n in "${names[@]}"; do .build/release/coroutines-bench "$n"; done
