// Executes the arm64 context switch (Sources/CCoroutines/context_arm64.S) and checks what AAPCS64
// requires of it, under qemu-aarch64 in CI (Scripts/arm64/check.sh): a switch keeps x19-x28,
// d8-d15 and FPCR of the side that switches away, whatever the other side does to them; a fresh
// context starts its entry with `arg` and a 16-byte aligned stack; switching back and forth many
// times keeps all of that. Exit status 0 when every check holds; each failure prints a line.
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

// The callee-saved state one side holds across a switch.
typedef struct { uint64_t x[10]; uint64_t d[8]; uint64_t fpcr; } saved_state;

// Loads x19-x28 and d8-d15 with values derived from `seed`, sets FPCR to `fpcr`, switches from
// `from` to `to` (through ccoro_switch or ccoro_switch_jump), and after the switch returns stores
// what those registers then hold into `out`. Everything the asm changes is declared clobbered,
// so the compiler keeps nothing of its own in them across the statement.
struct switch_args {
  const uint64_t *values;          // x19..x28 then d8..d15
  uint64_t fpcr;
  saved_state *out;
  void (*fn)(ccoro_context *, const ccoro_context *);
  ccoro_context *from;
  const ccoro_context *to;
};

static void switch_holding(uint64_t seed, uint64_t fpcr, ccoro_context *from, const ccoro_context *to,
                           int jump, saved_state *out) {
  uint64_t values[18];
  for (int i = 0; i < 18; i++) values[i] = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0x1000000010001ull;
  struct switch_args a = { values, fpcr, out, jump ? ccoro_switch_jump : ccoro_switch, from, to };
  // The arguments travel in x8 (the only general register not declared clobbered), kept on the
  // stack across the call.
  register struct switch_args *ap __asm__("x8") = &a;
  __asm__ volatile(
      "str x8, [sp, #-16]!\n"
      "ldr x9, [x8, #0]\n"
      "ldp x19, x20, [x9, #0]\n"
      "ldp x21, x22, [x9, #16]\n"
      "ldp x23, x24, [x9, #32]\n"
      "ldp x25, x26, [x9, #48]\n"
      "ldp x27, x28, [x9, #64]\n"
      "ldp d8, d9, [x9, #80]\n"
      "ldp d10, d11, [x9, #96]\n"
      "ldp d12, d13, [x9, #112]\n"
      "ldp d14, d15, [x9, #128]\n"
      "ldr x10, [x8, #8]\n"
      "msr fpcr, x10\n"
      "ldr x0, [x8, #32]\n"
      "ldr x1, [x8, #40]\n"
      "ldr x11, [x8, #24]\n"
      "blr x11\n"
      "ldr x8, [sp], #16\n"
      "ldr x9, [x8, #16]\n"
      "stp x19, x20, [x9, #0]\n"
      "stp x21, x22, [x9, #16]\n"
      "stp x23, x24, [x9, #32]\n"
      "stp x25, x26, [x9, #48]\n"
      "stp x27, x28, [x9, #64]\n"
      "stp d8, d9, [x9, #80]\n"
      "stp d10, d11, [x9, #96]\n"
      "stp d12, d13, [x9, #112]\n"
      "stp d14, d15, [x9, #128]\n"
      "mrs x10, fpcr\n"
      "str x10, [x9, #144]\n"
      : "+r"(ap)
      :
      : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x9", "x10", "x11", "x12", "x13",
        "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27",
        "x28", "x30", "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11",
        "d12", "d13", "d14", "d15", "d16", "d17", "d18", "d19", "d20", "d21", "d22", "d23", "d24",
        "d25", "d26", "d27", "d28", "d29", "d30", "d31", "memory", "cc");
  // `values` was laid out as x19..x28 then d8..d15: compare in that order.
  for (int i = 0; i < 10; i++) CHECK(out->x[i] == values[i], "seed %llu: x%d 0x%llx, expected 0x%llx",
                                     (unsigned long long)seed, 19 + i, (unsigned long long)out->x[i], (unsigned long long)values[i]);
  for (int i = 0; i < 8; i++) CHECK(out->d[i] == values[10 + i], "seed %llu: d%d 0x%llx, expected 0x%llx",
                                    (unsigned long long)seed, 8 + i, (unsigned long long)out->d[i], (unsigned long long)values[10 + i]);
  CHECK(out->fpcr == fpcr, "seed %llu: FPCR 0x%llx, expected 0x%llx", (unsigned long long)seed,
        (unsigned long long)out->fpcr, (unsigned long long)fpcr);
}

// FPCR rounding modes (RMode, bits 22-23) and flush-to-zero (bit 24): values each side sets.
static const uint64_t main_fpcr = (1ull << 22);               // round towards plus infinity
static const uint64_t coro_fpcr = (2ull << 22) | (1ull << 24); // towards minus infinity, FZ

static uint64_t entry_sp;
static void *entry_arg;
static int rounds = 1000;

static void coroutine_entry(void *arg) {
  uint64_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  entry_sp = sp;
  entry_arg = arg;
  saved_state s;
  for (int i = 0; ; i++) {
    // The coroutine holds its own values across each switch back to main.
    switch_holding(0xC0000000ull + (uint64_t)i, coro_fpcr, &coro_ctx, &main_ctx, i & 1, &s);
  }
}

int main(void) {
  size_t size = 64 * 1024;
  char *stack = aligned_alloc(16, size);
  // An odd top: ccoro_make must align it down to 16 bytes itself.
  ccoro_make(&coro_ctx, stack + size - 8, coroutine_entry, (void *)0x1234);
  saved_state s;
  for (int i = 0; i < rounds; i++) {
    switch_holding((uint64_t)i + 1, main_fpcr, &main_ctx, &coro_ctx, (i >> 1) & 1, &s);
    if (i == 0) {
      CHECK(entry_arg == (void *)0x1234, "entry received arg %p", entry_arg);
      CHECK(entry_sp % 16 == 0, "entry ran with sp 0x%llx, not 16-byte aligned", (unsigned long long)entry_sp);
      CHECK(entry_sp < (uint64_t)(stack + size) && entry_sp > (uint64_t)stack, "entry sp outside its stack");
    }
    if (failures > 20) break;
  }
  if (failures) { printf("%d checks failed\n", failures); return 1; }
  printf("arm64 switch: x19-x28, d8-d15 and FPCR kept across %d round trips each way (ccoro_switch and ccoro_switch_jump); entry aligned, arg passed\n", rounds);
  return 0;
}
