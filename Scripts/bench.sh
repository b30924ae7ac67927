#!/usr/bin/env bash
# Runs coroutines-bench in release: pinned to one core (the headline figures: a scheduler is one
# thread, and Swift's cooperative pool then has one thread too), then unpinned.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product coroutines-bench
export COROUTINES_QUIET=1
echo "## pinned (taskset -c 0)"
taskset -c 0 .build/release/coroutines-bench "$@"
echo
echo "## unpinned"
.build/release/coroutines-bench "$@"
