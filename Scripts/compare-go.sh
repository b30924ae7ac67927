#!/usr/bin/env bash
# Runs the Go counterparts of the channel and spawn benchmarks (Scripts/go/main.go) next to
# coroutines-bench, pinned to one core (GOMAXPROCS=1) as the headline figures. Go is only a
# point of comparison: install it with `apt-get install golang-go` (Go 1.19 on Debian 12).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "Go is not installed (apt-get install golang-go)"; exit 1; }
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(pingpong buffered select sieve spawn skynet)
go build -o /tmp/coroutines-go-bench ./Scripts/go/main.go
swift build -c release --product coroutines-bench >/dev/null
echo "--- pinned to one core (taskset -c 0, GOMAXPROCS=1)"
COROUTINES_QUIET=1 taskset -c 0 .build/release/coroutines-bench "${names[@]}"
GOMAXPROCS=1 taskset -c 0 /tmp/coroutines-go-bench "${names[@]}"
