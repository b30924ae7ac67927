#!/usr/bin/env bash
# Runs coroutines-bench in release: pinned to one core (the headline figures: a scheduler is one
# thread, and Swift's cooperative pool then has one thread too), then unpinned; the pool
# benchmarks (skynet-pool, skew, idle, idle-launches) only unpinned, since they measure how work
# spreads over the CPUs, and timer-precision only unpinned (how late a timer fires; pinned, the
# peer's timer thread would share the core). Each benchmark
# runs in its own process: in one process, earlier benchmarks leave heap and stack-pool state that
# changes later figures.
#   Scripts/bench.sh                 every benchmark
#   Scripts/bench.sh spawn promise   just these
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product coroutines-bench
export COROUTINES_QUIET=1
pool_names=(timer-precision skynet-pool skew idle idle-launches)
names=()
pools=()
if [ $# -eq 0 ]; then
  names=(switch yield generator generator-in-coroutine spawn skynet promise pingpong pingpong-threads
         buffered select sieve actor actor-request parked parked-1m echo)
  pools=("${pool_names[@]}")
else
  for n in "$@"; do
    if [[ " ${pool_names[*]} " == *" $n "* ]]; then pools+=("$n"); else names+=("$n"); fi
  done
fi
if [ ${#names[@]} -gt 0 ]; then
  echo "## pinned (taskset -c 0)"
  for n in "${names[@]}"; do taskset -c 0 .build/release/coroutines-bench "$n"; done
  echo
  echo "## unpinned"
  for n in "${names[@]}"; do .build/release/coroutines-bench "$n"; done
fi
if [ ${#pools[@]} -gt 0 ]; then
  echo
  echo "## unpinned only (the pool benchmarks: each workload in a child process of its own)"
  for n in "${pools[@]}"; do .build/release/coroutines-bench "$n"; done
fi
