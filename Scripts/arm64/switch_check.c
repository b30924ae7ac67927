// Executes the arm64 context switch (Sources/CCoroutines/context_arm64.S) under qemu-aarch64 in CI
// (Scripts/arm64/check.sh) and checks what AAPCS64 and the runtime require of it. The switches
// among main, A and B, the checks after each and at each fresh entry, the unwind walks and the
// reporting are Scripts/switch_check/common.h's (shared with Scripts/x86_64/switch_check.c; its
// comment describes them); this file gives them arm64's registers and instructions:
//
// * Registers. A side that switches away loads values of its own into x19-x28, the frame pointer
//   x29 and d8-d15, and one of two FPCR values of its own (rounding mode, FZ, DN, AHP; six values
//   in all). When it is switched back to, it checks them and sp. x30 (the link register) need not
//   survive a call: what a switch must keep of it is its return address, and the switch returning
//   to the instruction after its call, with sp and the registers above intact, is that proof.
// * Entry. entry_stub checks that sp is 16-byte aligned and records sp, x0 (the argument), x29
//   (must be 0), x30 (must be a return address inside ccoro_trampoline) and FPCR (must be 0, the
//   default ccoro_make lays out).
// * Unwind. ccoro_trampoline ends the walk by marking x30 undefined in its CFI (`.cfi_undefined
//   x30`: the unwinder takes the return address as 0, end of stack); without that, x30's rule
//   would be "same value" and the walk would find the trampoline again and again. The 16 bytes
//   above B's first frame hold a frame record into main's caller instead of ccoro_make's zeros
//   (the DWARF walk does not read them; x29 = 0 keeps frame-pointer walks off them), so that a
//   walk going past the trampoline would find a plausible caller.
//
// Built with -I Scripts/switch_check.
#define NREGS 19   // x19..x29, d8..d15
#define NCTLS 1    // FPCR
#define SP_REG "sp"
#define FP_REG "x29"
#define ARG_REG "x0"
#define ENTRY_RA_FAILURE "entry started with x30 0x%llx, not a return into ccoro_trampoline"
// Compiled code assumes the alignment: clang computes addresses of stack objects with `orr`.
#define ENTRY_MISALIGNED "not 16-byte aligned"
#define SUMMARY                                                                                                    \
  "arm64 switch: %llu switches among main, A and B (cycles both ways and a pseudo-random order, every pair "       \
  "through ccoro_switch and ccoro_switch_jump, each at least %llu times) kept x19-x29, d8-d15, FPCR and sp of "    \
  "each side; fresh contexts entered 16-byte aligned with x29 = 0, x30 in ccoro_trampoline, FPCR 0 and their "     \
  "argument; unwinds from A and B ended at ccoro_trampoline (4 walks); then main and S swapped %llu times "      \
  "through ccoro_switch_swap, keeping x19-x29, d8-d15 and sp of each side and sharing FPCR; unwinds from S "       \
  "ended at ccoro_trampoline (2 walks)"
#include "common.h"

static const char *const reg_names[NREGS] = {
  "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29",
  "d8", "d9", "d10", "d11", "d12", "d13", "d14", "d15",
};

// FPCR values (RMode bits 22-23, FZ 24, DN 25, AHP 26): two of its own for each context.
static const struct control controls[NCTLS] = {
  { "FPCR", ~0ull, DEFAULT(0),
    { { 1ull << 22, (1ull << 22) | (1ull << 25) },
      { (2ull << 22) | (1ull << 24), (2ull << 22) | (1ull << 26) },
      { 3ull << 22, (3ull << 22) | (1ull << 24) | (1ull << 25) } } },
};

// x19..x28, x29 at 0..80, d8..d15 at 88..144, FPCR at 152, sp at 160 (offsets used by the asm).
_Static_assert(offsetof(held, ctl) == 152 && offsetof(held, sp) == 160, "held offsets");

// The arguments travel in x8, the only general register not declared clobbered; the asm keeps
// it, and the compiler's x29 (not declarable as clobbered), on the stack across the call.
static void call_switch(struct switch_args *a) {
  register struct switch_args *ap __asm__("x8") = a;
  __asm__ volatile(
      "stp x29, x8, [sp, #-16]!\n"
      "ldr x9, [x8, #0]\n"
      "ldp x19, x20, [x9, #0]\n"
      "ldp x21, x22, [x9, #16]\n"
      "ldp x23, x24, [x9, #32]\n"
      "ldp x25, x26, [x9, #48]\n"
      "ldp x27, x28, [x9, #64]\n"
      "ldr x29, [x9, #80]\n"
      "ldp d8, d9, [x9, #88]\n"
      "ldp d10, d11, [x9, #104]\n"
      "ldp d12, d13, [x9, #120]\n"
      "ldp d14, d15, [x9, #136]\n"
      "ldr x10, [x9, #152]\n"
      "msr fpcr, x10\n"
      "mov x10, sp\n"
      "str x10, [x9, #160]\n"
      "ldr x0, [x8, #24]\n"
      "ldr x1, [x8, #32]\n"
      "ldr x11, [x8, #16]\n"
      "blr x11\n"
      "mov x10, sp\n"
      "mov x11, x29\n"
      "ldp x29, x8, [sp], #16\n"
      "ldr x9, [x8, #8]\n"
      "stp x19, x20, [x9, #0]\n"
      "stp x21, x22, [x9, #16]\n"
      "stp x23, x24, [x9, #32]\n"
      "stp x25, x26, [x9, #48]\n"
      "stp x27, x28, [x9, #64]\n"
      "str x11, [x9, #80]\n"
      "stp d8, d9, [x9, #88]\n"
      "stp d10, d11, [x9, #104]\n"
      "stp d12, d13, [x9, #120]\n"
      "stp d14, d15, [x9, #136]\n"
      "mrs x12, fpcr\n"
      "str x12, [x9, #152]\n"
      "str x10, [x9, #160]\n"
      : "+r"(ap)
      :
      : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x9", "x10", "x11", "x12", "x13", "x14", "x15",
        "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x30",
        "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14",
        "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28",
        "v29", "v30", "v31", "memory", "cc");
}

// Records sp, x0, x29, x30 and FPCR as the trampoline leaves them, then tail-jumps to
// coroutine_entry (so no frame of its own appears in a walk), or, if sp is not 16-byte aligned,
// aligns it and calls entry_misaligned.
__attribute__((naked)) static void entry_stub(void *arg) {
  __asm__ volatile(
      "adrp x9, switch_check_entry\n"
      "add x9, x9, :lo12:switch_check_entry\n"
      "mov x10, sp\n"
      "str x10, [x9, #0]\n"
      "str x0, [x9, #8]\n"
      "str x29, [x9, #16]\n"
      "str x30, [x9, #24]\n"
      "mrs x10, fpcr\n"
      "str x10, [x9, #32]\n"
      "mov x10, sp\n"
      "tst x10, #15\n"
      "b.ne 1f\n"
      "b coroutine_entry\n"
      "1: and sp, x10, #~15\n"
      "bl entry_misaligned\n"
      "brk #0\n");
}

// A frame record (x29, x30) into main's caller.
static void fill_above_first_frame(void **top, void *frame, void *ret) {
  top[-2] = frame;
  top[-1] = ret;
}

static void restore_controls(void) { __asm__ volatile("msr fpcr, xzr"); }
