#!/usr/bin/env bash
# Flake finder: runs the test command N times and prints, per test, in how many runs it failed.
#
#   Scripts/flake.sh N                 # `swift test` (the README's test command), N times
#   Scripts/flake.sh N --ci            # the whole `.ci/run` sequence N times (debug, release and
#                                      # ThreadSanitizer steps; each run takes several minutes)
#   Scripts/flake.sh N -- ARGS…        # `swift test ARGS…`, e.g. -- --filter OffloadTests
#
# A run that ends without Swift Testing's closing line ("Test run with … passed/failed") crashed
# or hung; the script then names the tests that had started but not finished in that run. Every
# run's full output is kept in $FLAKE_DIR (default: a new directory under /tmp) for reading later.
# Exit status: 0 when every run passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
runs=$1; shift
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "flake.sh: N must be a positive whole number, not '$runs'" >&2; usage; }
mode=test
test_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) mode=ci; shift ;;
    --) shift; test_args=("$@"); break ;;
    *) echo "flake.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

dir=${FLAKE_DIR:-$(mktemp -d /tmp/flake.XXXXXX)}
mkdir -p "$dir"
export COROUTINES_QUIET=1

# Build once up front so that a compile error is reported as such, not as N failed runs.
if [ "$mode" = test ]; then
  swift build --build-tests >"$dir/build.log" 2>&1 || { echo "flake.sh: the build failed (see $dir/build.log)"; tail -20 "$dir/build.log"; exit 1; }
fi

green=0
for i in $(seq 1 "$runs"); do
  log="$dir/run-$i.log"
  start=$(date +%s)
  if [ "$mode" = ci ]; then
    bash .ci/run >"$log" 2>&1; status=$?
  else
    swift test "${test_args[@]}" >"$log" 2>&1; status=$?
  fi
  took=$(( $(date +%s) - start ))
  closing=$(grep -cE '^. Test run with [0-9]+ tests? .* (passed|failed)' "$log")
  failed_runs=$(grep -cE '^. Test run with [0-9]+ tests? .* failed' "$log")
  if [ "$status" -eq 0 ]; then
    green=$((green + 1)); verdict="green"
  elif [ "$failed_runs" -gt 0 ]; then
    verdict="red (tests failed)"
  else
    verdict="red (exit $status without a failed test: a crash, a hang or a failed step)"
  fi
  printf 'run %d/%d: %s in %d s (%d test runs closed)\n' "$i" "$runs" "$verdict" "$took" "$closing"
  # Tests that failed: Swift Testing's "✘ Test "name" failed …" (or "✘ Test name() failed …").
  grep -E '^. Test .* failed after' "$log" | sed -E 's/^. Test (.*) failed after.*/\1/' | sort -u >"$dir/failed-$i.txt"
  # A run that never closed: the tests that started and did not finish were running when it died.
  if [ "$status" -ne 0 ] && [ "$failed_runs" -eq 0 ]; then
    grep -E '^. Test .* started\.$' "$log" | sed -E 's/^. Test (.*) started\.$/\1/' | sort >"$dir/started-$i.txt"
    grep -E '^. Test .* (passed|failed|skipped)' "$log" | sed -E 's/^. Test (.*) (passed|failed|skipped).*/\1/' | sort -u >"$dir/ended-$i.txt"
    comm -23 "$dir/started-$i.txt" "$dir/ended-$i.txt" | sed 's/^/(unfinished) /' >>"$dir/failed-$i.txt"
    tail -5 "$log" | sed 's/^/    | /'
  fi
done

echo
echo "== $green of $runs runs green ($mode; logs in $dir) =="
if cat "$dir"/failed-*.txt 2>/dev/null | grep -q .; then
  echo "runs failed  test"
  cat "$dir"/failed-*.txt | sort | uniq -c | sort -rn | awk '{n=$1; $1=""; printf "%11d %s\n", n, substr($0, 2)}'
fi
[ "$green" -eq "$runs" ]
