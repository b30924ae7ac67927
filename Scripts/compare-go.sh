#!/usr/bin/env bash
# Runs the Go counterparts of the channel and spawn benchmarks (Scripts/go/main.go) next to
# coroutines-bench, pinned to one core (GOMAXPROCS=1) as the headline figures; then Go's spawn
# and skynet again unpinned with GOMAXPROCS=2, next to ours unpinned (one scheduler, so one
# thread: what Go's second thread buys it). Go is only a point of comparison, never a build or
# test dependency: run as root, the script installs it with `apt-get install golang-go` (Go 1.19
# on Debian 12) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Go is not installed: apt-get install golang-go"
    apt-get install -y golang-go >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y golang-go >/dev/null; }
  fi
  command -v go >/dev/null || { echo "Go is not installed (apt-get install golang-go)"; exit 1; }
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(pingpong buffered select sieve spawn skynet)
go build -o /tmp/coroutines-go-bench ./Scripts/go/main.go
swift build -c release --product coroutines-bench >/dev/null
echo "--- pinned to one core (taskset -c 0, GOMAXPROCS=1)"
COROUTINES_QUIET=1 taskset -c 0 .build/release/coroutines-bench "${names[@]}"
GOMAXPROCS=1 taskset -c 0 /tmp/coroutines-go-bench "${names[@]}"
# Go's scheduler spreads spawn and skynet over GOMAXPROCS threads; a coroutine stays on its
# scheduler, and runBlocking drives one, so ours stay one thread here.
parallel=()
for n in "${names[@]}"; do
  case $n in spawn|skynet) parallel+=("$n") ;; esac
done
if [ ${#parallel[@]} -gt 0 ]; then
  echo
  echo "--- unpinned (GOMAXPROCS=2; coroutines-bench without its Swift peers)"
  COROUTINES_QUIET=1 COROUTINES_BENCH_NO_PEER=1 .build/release/coroutines-bench "${parallel[@]}"
  GOMAXPROCS=2 /tmp/coroutines-go-bench "${parallel[@]}"
fi
