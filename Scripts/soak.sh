#!/usr/bin/env bash
# The soak: builds coroutines-soak in release mode and runs it for [seconds] (default: the
# program's, long enough for at least 10^7 channel operations on the project's 2-core machine).
# Rounds of channels (rendezvous, buffered, unbounded, select over several) on a pool of 4
# schedulers, with close and cancel racing the traffic; every value checked — nothing lost,
# duplicated, or received whose send threw — and, at the end, no descriptor, stack, timer or
# coroutine more than at the start, resident memory within its slack. Non-zero exit on any of
# them (see Sources/coroutines-soak). SOAK_SEED=N repeats a run's rounds; SOAK_SWIFT_FLAGS adds
# build flags (CI passes those of its release test build, so that build is reused).
#
#   Scripts/soak.sh          # the default length
#   Scripts/soak.sh 60       # one minute
set -euo pipefail
cd "$(dirname "$0")/.."
export COROUTINES_QUIET="${COROUTINES_QUIET:-1}"
read -r -a flags <<< "${SOAK_SWIFT_FLAGS:-}"
swift build -c release --product coroutines-soak ${flags[@]+"${flags[@]}"} 2>&1 | tail -1
bin=$(swift build -c release ${flags[@]+"${flags[@]}"} --show-bin-path)
exec "$bin/coroutines-soak" "$@"
