// Executes the x86_64 context switch (Sources/CCoroutines/context_x86_64.S) natively in CI
// (Scripts/x86_64/check.sh) and checks what the System V ABI and the runtime require of it. The
// switches among main, A and B, the checks after each and at each fresh entry, the unwind walks
// and the reporting are Scripts/switch_check/common.h's (shared with Scripts/arm64/switch_check.c;
// its comment describes them); this file gives them x86_64's registers and instructions:
//
// * Registers. A side that switches away loads values of its own into rbx, rbp and r12-r15, and
//   one of two MXCSR values (rounding, FTZ, DAZ) and x87 control words (rounding, precision) of its
//   context's (see `controls`). When it is switched back to, it checks them (MXCSR without its
//   exception flags, which any side may raise) and rsp. The switch loads either control register
//   only when the target's value differs from the current one, so the contexts' values overlap:
//   some switches find the target's value equal (the load is skipped, on a fresh entry too), others
//   find it differing in one field only (a comparison that ignored that field would skip a load).
// * Entry. entry_stub checks that rsp is aligned as after a call ((rsp + 8) % 16 == 0) and
//   records rsp, rdi (the argument), rbp (must be 0), the return address at (rsp) (must be into
//   ccoro_trampoline), MXCSR and the x87 control word (must be the defaults 0x1F80 and 0x037F that
//   ccoro_make lays out).
// * Unwind. ccoro_trampoline ends the walk by marking the return address undefined in its CFI
//   (`.cfi_undefined %rip`: the unwinder takes it as 0, end of stack). ccoro_make also leaves a
//   zero word where the trampoline's return address would be, which would stop the walk too: B's
//   stack has a return address into main's caller in that word instead, so nothing but the CFI
//   can stop the walk there.
//
// Built with -fomit-frame-pointer (so that the asm may clobber rbp), -mno-red-zone (it pushes) and
// -I Scripts/switch_check.
#define NREGS 6   // rbx, rbp, r12..r15
#define NCTLS 2   // MXCSR, x87 control word
#define SP_REG "rsp"
#define FP_REG "rbp"
#define ARG_REG "rdi"
#define ENTRY_RA_FAILURE "entry's return address is 0x%llx, not into ccoro_trampoline"
// Compiled code assumes the alignment: movaps to the stack faults without it.
#define ENTRY_MISALIGNED "not aligned as after a call ((rsp + 8) %% 16 != 0)"
#define SUMMARY                                                                                                  \
  "x86_64 switch: %llu switches among main, A and B (cycles both ways and a pseudo-random order, every pair "     \
  "through ccoro_switch and ccoro_switch_jump, each at least %llu times) kept rbx, rbp, r12-r15, MXCSR, the "    \
  "x87 control word and rsp of each side; fresh contexts entered with (rsp + 8) %% 16 == 0, rbp = 0, a return "  \
  "into ccoro_trampoline, the default MXCSR and control word and their argument; unwinds from A and B ended at " \
  "ccoro_trampoline (4 walks); then main and S swapped %llu times through ccoro_switch_swap, keeping rbx, rbp, " \
  "r12-r15 and rsp of each side and sharing MXCSR and the x87 control word; unwinds from S ended at "            \
  "ccoro_trampoline (2 walks)"
#include "common.h"

static const char *const reg_names[NREGS] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };

// MXCSR (exceptions masked; DAZ bit 6, rounding bits 13-14, FTZ bit 15; bits 0-5, the exception
// flags, not compared) and x87 control word (exceptions masked; precision bits 8-9, rounding bits
// 10-11) values: two per context, chosen so that the conditional loads are exercised both ways:
// some switches find the target's value equal to the current one, others differing in a single
// bit of one field (a comparison that missed that bit would skip a load that is needed). Switch 0
// (main -> A, A's fresh entry) carries main's first values, switch 1 (A -> B, B's fresh entry) A's
// second MXCSR and first control word.
// * MXCSR: main's second = B's first. Differing in one bit only: main's second and A's first
//   (DAZ), A's second and B's second (FTZ), main's first and B's second (rounding bit 13), A's
//   first and B's second (rounding bit 14). A's fresh entry finds main's first, the default (the
//   load is skipped); B's finds A's second (loaded).
// * x87: main's first = A's second = the default. Differing in one bit only: main's second and
//   A's second (precision bit 8), main's second and B's second (precision bit 9), A's first and
//   B's first (rounding bit 10), main's first and A's first (rounding bit 11). A's fresh entry
//   finds the default (skipped); B's finds A's first (loaded).
#define R(n) ((n##u) << 13)   // MXCSR rounding
#define DAZ (1u << 6)
#define FTZ (1u << 15)
static const struct control controls[NCTLS] = {
  { "MXCSR", ~0x3Full, DEFAULT(0x1F80),
    { { 0x1F80, 0x1F80 | R(3) | DAZ },
      { 0x1F80 | R(3), 0x1F80 | R(1) | FTZ },
      { 0x1F80 | R(3) | DAZ, 0x1F80 | R(1) } } },
  { "x87 control word", ~0ull, DEFAULT(0x037F),
    { { 0x037F, 0x027F },
      { 0x0B7F, 0x037F },
      { 0x0F7F, 0x007F } } },
};
#undef R
#undef DAZ
#undef FTZ

// rbx, rbp, r12..r15 at 0..40, MXCSR at 48, x87 CW at 56 (ldmxcsr/stmxcsr and fldcw/fnstcw use the
// low 4 and 2 bytes), rsp at 64 (offsets used by the asm).
_Static_assert(offsetof(held, ctl) == 48 && offsetof(held, sp) == 64, "held offsets");

// The arguments travel in rax, kept on the stack across the call (pushed twice: the call keeps
// 16-byte alignment). Everything the asm changes is declared clobbered.
static void call_switch(struct switch_args *a) {
  __asm__ volatile(
      "pushq %%rax\n"
      "pushq %%rax\n"
      "movq 0(%%rax), %%r11\n"
      "movq %%rsp, 64(%%r11)\n"
      "movq 0(%%r11), %%rbx\n"
      "movq 8(%%r11), %%rbp\n"
      "movq 16(%%r11), %%r12\n"
      "movq 24(%%r11), %%r13\n"
      "movq 32(%%r11), %%r14\n"
      "movq 40(%%r11), %%r15\n"
      "ldmxcsr 48(%%r11)\n"
      "fldcw 56(%%r11)\n"
      "movq 24(%%rax), %%rdi\n"
      "movq 32(%%rax), %%rsi\n"
      "callq *16(%%rax)\n"
      "movq %%rsp, %%rcx\n"
      "popq %%rax\n"
      "popq %%rax\n"
      "movq 8(%%rax), %%r11\n"
      "movq %%rbx, 0(%%r11)\n"
      "movq %%rbp, 8(%%r11)\n"
      "movq %%r12, 16(%%r11)\n"
      "movq %%r13, 24(%%r11)\n"
      "movq %%r14, 32(%%r11)\n"
      "movq %%r15, 40(%%r11)\n"
      "stmxcsr 48(%%r11)\n"
      "fnstcw 56(%%r11)\n"
      "movq %%rcx, 64(%%r11)\n"
      : "+a"(a)
      :
      : "rbx", "rbp", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
}

// Records rsp, rdi, rbp, the return address, MXCSR and the x87 control word as the trampoline's
// call leaves them (MXCSR's 4 and the control word's 2 bytes at the bottom of zeroed 8-byte
// slots), then tail-jumps to coroutine_entry (so no frame of its own appears in a walk), or, if
// rsp is not aligned as after a call, aligns it and calls entry_misaligned.
__attribute__((naked)) static void entry_stub(void *arg) {
  __asm__ volatile(
      "movq %rsp, switch_check_entry(%rip)\n"
      "movq %rdi, switch_check_entry+8(%rip)\n"
      "movq %rbp, switch_check_entry+16(%rip)\n"
      "movq (%rsp), %rax\n"
      "movq %rax, switch_check_entry+24(%rip)\n"
      "stmxcsr switch_check_entry+32(%rip)\n"
      "fnstcw switch_check_entry+40(%rip)\n"
      "leaq 8(%rsp), %rax\n"
      "testq $15, %rax\n"
      "jnz 1f\n"
      "jmp coroutine_entry\n"
      "1: andq $-16, %rsp\n"
      "callq entry_misaligned\n"
      "ud2\n");
}

// The trampoline's would-be return address (at its CFA - 8, top - 16) is a return into main's
// caller, the word above it a stack address.
static void fill_above_first_frame(void **top, void *frame, void *ret) {
  top[-2] = ret;
  top[-1] = frame;
}

static void restore_controls(void) {
  static const uint32_t mxcsr = 0x1F80;
  static const uint16_t cw = 0x037F;
  __asm__ volatile("ldmxcsr %0\n"
                   "fldcw %1\n"
                   :
                   : "m"(mxcsr), "m"(cw));
}
