#!/usr/bin/env bash
# Executes the x86_64 context switch natively and checks that it keeps what the System V ABI
# requires, that fresh contexts start aligned and that unwinding stops at their first frame
# (Scripts/x86_64/switch_check.c, with the part it shares with the arm64 check in
# Scripts/switch_check/common.h). clang comes with the Swift toolchain. SWITCH_ASM=path checks
# another copy of the assembly (e.g. a deliberately broken one) instead of
# Sources/CCoroutines/context_x86_64.S.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(uname -m)" = x86_64 ] || { echo "x86_64 check: skipped on $(uname -m)"; exit 0; }
out=/tmp/coroutines-x86_64
mkdir -p "$out"
clang -O2 -fomit-frame-pointer -mno-red-zone -fasynchronous-unwind-tables -I Scripts/switch_check \
  Scripts/x86_64/switch_check.c "${SWITCH_ASM:-Sources/CCoroutines/context_x86_64.S}" -o "$out/switch_check"
"$out/switch_check"
