#!/usr/bin/env bash
# Runs the `echo` benchmark's client load (100 loopback clients × 1,000 round trips of 64 bytes,
# coroutines-bench --echo-client) against three servers, each in its own process:
#   1. coroutines-echo (a coroutine per connection across the default SchedulerPool),
#   2. a Go echo server (a goroutine per connection; Scripts/go/echo), when `go` is installed.
# Go is never a build or test dependency of the package; without it only (1) runs.
#
#   Scripts/echo-vs-go.sh [clients] [roundTrips] [runs]
#   PIN="taskset -c 0" Scripts/echo-vs-go.sh      # run servers and client on one core
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-100}
round_trips=${2:-1000}
runs=${3:-5}
pin=${PIN:-}

swift build -c release --product coroutines-bench >/dev/null
swift build -c release --product coroutines-echo >/dev/null
bin=$(swift build -c release --show-bin-path)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for_port() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server on port $1 did not start" >&2; return 1
}

port=$(free_port)
$pin "$bin/coroutines-echo" "$port" 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
wait_for_port "$port"
ours=$($pin "$bin/coroutines-bench" --echo-client 127.0.0.1 "$port" "$clients" "$round_trips" "$runs" 2>/dev/null | tail -1)
echo "coroutines-echo:  $ours"

if ! command -v go >/dev/null 2>&1; then
  echo "go is not installed: skipping the Go comparison"
  exit 0
fi
go_bin=$(mktemp -d)/go-echo
go build -o "$go_bin" ./Scripts/go/echo/main.go
port=$(free_port)
$pin "$go_bin" -addr "127.0.0.1:$port" >/dev/null 2>&1 &
pids+=($!)
wait_for_port "$port"
theirs=$($pin "$bin/coroutines-bench" --echo-client 127.0.0.1 "$port" "$clients" "$round_trips" "$runs" 2>/dev/null | tail -1)
echo "go ($(go version | awk '{print $3}')):   $theirs"

rate() { sed -E 's/.*requests\/s median=([0-9.]+).*/\1/' <<<"$1"; }
python3 - "$(rate "$ours")" "$(rate "$theirs")" <<'PY'
import sys
ours, go = float(sys.argv[1]), float(sys.argv[2])
print(f"ratio coroutines-echo / go: {ours / go:.2f}×")
PY
