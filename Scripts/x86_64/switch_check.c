// Executes the x86_64 context switch (Sources/CCoroutines/context_x86_64.S) natively and checks
// what the System V ABI requires of it (Scripts/x86_64/check.sh, run by CI): a switch keeps rbx,
// rbp, r12-r15, the MXCSR control bits and the x87 control word of the side that switches away,
// whatever the other side does to them; a fresh context starts its entry with `arg` and a stack
// aligned as after a call; many switches back and forth, through both ccoro_switch and
// ccoro_switch_jump, keep all of that. Exit status 0 when every check holds; each failure prints
// a line. The companion of Scripts/arm64/switch_check.c.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct ccoro_context { void *sp; } ccoro_context;
void ccoro_switch(ccoro_context *from, const ccoro_context *to);
void ccoro_switch_jump(ccoro_context *from, const ccoro_context *to);
void ccoro_make(ccoro_context *ctx, void *stack_top, void (*entry)(void *), void *arg);

static ccoro_context main_ctx, coro_ctx;
static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

// The callee-saved state one side holds across a switch: rbx, rbp, r12-r15, MXCSR, x87 CW.
typedef struct { uint64_t x[6]; uint32_t mxcsr; uint16_t cw; } saved_state;

struct switch_args {
  const uint64_t *values;   // +0: rbx, rbp, r12..r15
  uint32_t mxcsr;           // +8
  uint16_t cw;              // +12
  saved_state *out;         // +16
  void (*fn)(ccoro_context *, const ccoro_context *);   // +24
  ccoro_context *from;      // +32
  const ccoro_context *to;  // +40
};

// Loads the callee-saved registers with values derived from `seed`, sets MXCSR and the x87
// control word, switches from `from` to `to`, and after the switch returns stores what they then
// hold into `out`. Everything the asm changes is declared clobbered (built with
// -fomit-frame-pointer so that rbp may be, and -mno-red-zone because the asm pushes).
static void switch_holding(uint64_t seed, uint32_t mxcsr, uint16_t cw, ccoro_context *from, const ccoro_context *to,
                           int jump, saved_state *out) {
  uint64_t values[6];
  for (int i = 0; i < 6; i++) values[i] = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0x1000000010001ull;
  struct switch_args a = { values, mxcsr, cw, out, jump ? ccoro_switch_jump : ccoro_switch, from, to };
  struct switch_args *ap = &a;
  __asm__ volatile(
      "pushq %%rax\n"
      "pushq %%rax\n"                 // twice: the call below keeps 16-byte alignment
      "movq 0(%%rax), %%r11\n"
      "movq 0(%%r11), %%rbx\n"
      "movq 8(%%r11), %%rbp\n"
      "movq 16(%%r11), %%r12\n"
      "movq 24(%%r11), %%r13\n"
      "movq 32(%%r11), %%r14\n"
      "movq 40(%%r11), %%r15\n"
      "ldmxcsr 8(%%rax)\n"
      "fldcw 12(%%rax)\n"
      "movq 32(%%rax), %%rdi\n"
      "movq 40(%%rax), %%rsi\n"
      "callq *24(%%rax)\n"
      "popq %%rax\n"
      "popq %%rax\n"
      "movq 16(%%rax), %%r11\n"
      "movq %%rbx, 0(%%r11)\n"
      "movq %%rbp, 8(%%r11)\n"
      "movq %%r12, 16(%%r11)\n"
      "movq %%r13, 24(%%r11)\n"
      "movq %%r14, 32(%%r11)\n"
      "movq %%r15, 40(%%r11)\n"
      "stmxcsr 48(%%r11)\n"
      "fnstcw 52(%%r11)\n"
      : "+a"(ap)
      :
      : "rbx", "rbp", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
  static const char *names[6] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };
  for (int i = 0; i < 6; i++) CHECK(out->x[i] == values[i], "seed %llu: %s 0x%llx, expected 0x%llx",
                                    (unsigned long long)seed, names[i], (unsigned long long)out->x[i], (unsigned long long)values[i]);
  // The control bits only: the exception flags (bits 0-5) may be raised by either side.
  CHECK((out->mxcsr & ~0x3Fu) == (mxcsr & ~0x3Fu), "seed %llu: MXCSR 0x%x, expected 0x%x", (unsigned long long)seed,
        out->mxcsr, mxcsr);
  CHECK(out->cw == cw, "seed %llu: x87 control word 0x%x, expected 0x%x", (unsigned long long)seed, out->cw, cw);
}

// Rounding modes and flush-to-zero each side sets (exceptions masked, as by default).
static const uint32_t main_mxcsr = 0x1F80 | (1u << 13);              // round down
static const uint32_t coro_mxcsr = 0x1F80 | (2u << 13) | (1u << 15); // round up, FTZ
static const uint16_t main_cw = 0x037F | (1u << 10);                  // round down
static const uint16_t coro_cw = 0x037F | (2u << 10);                  // round up

static uint64_t entry_sp;
static void *entry_arg;
static const int rounds = 1000000;

static void coroutine_entry(void *arg) {
  uint64_t sp;
  // Before any call of its own the compiler keeps rsp 16-byte aligned in a function that calls,
  // provided the function was entered as after a call (rsp + 8 aligned).
  __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
  entry_sp = sp;
  entry_arg = arg;
  saved_state s;
  for (int i = 0; ; i++) {
    switch_holding(0xC0000000ull + (uint64_t)i, coro_mxcsr, coro_cw, &coro_ctx, &main_ctx, i & 1, &s);
  }
}

int main(void) {
  size_t size = 64 * 1024;
  char *stack = aligned_alloc(16, size);
  // An odd top: ccoro_make must align it itself.
  ccoro_make(&coro_ctx, stack + size - 8, coroutine_entry, (void *)0x1234);
  saved_state s;
  for (int i = 0; i < rounds; i++) {
    switch_holding((uint64_t)i + 1, main_mxcsr, main_cw, &main_ctx, &coro_ctx, (i >> 1) & 1, &s);
    if (i == 0) {
      CHECK(entry_arg == (void *)0x1234, "entry received arg %p", entry_arg);
      CHECK(entry_sp % 16 == 0, "entry ran with rsp 0x%llx, not aligned as after a call", (unsigned long long)entry_sp);
      CHECK(entry_sp < (uint64_t)(stack + size) && entry_sp > (uint64_t)stack, "entry rsp outside its stack");
    }
    if (failures > 20) break;
  }
  if (failures) { printf("%d checks failed\n", failures); return 1; }
  printf("x86_64 switch: rbx, rbp, r12-r15, MXCSR and the x87 control word kept across %d round trips each way (ccoro_switch and ccoro_switch_jump); entry aligned, arg passed\n", rounds);
  return 0;
}
