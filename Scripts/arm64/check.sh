#!/usr/bin/env bash
# Executes the arm64 context switch under qemu-aarch64 (user mode) and checks that it keeps what
# AAPCS64 requires, that fresh contexts start aligned and that unwinding stops at their first frame
# (Scripts/arm64/switch_check.c, with the part it shares with the x86_64 check in
# Scripts/switch_check/common.h). Run as root, it installs Debian's qemu-user,
# gcc-aarch64-linux-gnu's C library (libc6-dev-arm64-cross) when missing; clang comes with the
# Swift toolchain. SWITCH_ASM=path checks another copy of the assembly (e.g. a deliberately broken
# one) instead of Sources/CCoroutines/context_arm64.S.
set -euo pipefail
cd "$(dirname "$0")/../.."
need=()
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ -e /usr/aarch64-linux-gnu/lib/crt1.o ] || need+=(libc6-dev-arm64-cross libgcc-12-dev-arm64-cross)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "arm64 check: needs ${need[*]} (apt-get install)"; exit 1; }
  apt-get install -y "${need[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "${need[@]}" >/dev/null; }
fi
out=/tmp/coroutines-arm64
mkdir -p "$out"
gcc_dir=$(dirname "$(ls /usr/lib/gcc-cross/aarch64-linux-gnu/*/libgcc.a | head -1)")
clang -target aarch64-linux-gnu -O2 -fasynchronous-unwind-tables -fuse-ld=lld --sysroot=/usr/aarch64-linux-gnu -B "$gcc_dir" -L "$gcc_dir" \
  -isystem /usr/aarch64-linux-gnu/include -I Scripts/switch_check \
  Scripts/arm64/switch_check.c "${SWITCH_ASM:-Sources/CCoroutines/context_arm64.S}" -o "$out/switch_check" -static
qemu-aarch64 "$out/switch_check"
