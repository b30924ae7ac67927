// Times the x86_64 context switch of Sources/CCoroutines/context_x86_64.S against Boost.Context's
// jump_fcontext (Debian's libboost-context-dev; a comparison only, never a build dependency), in
// one program: Scripts/compare-boost.sh builds and runs it.
//
// Each variant ping-pongs between the main stack and one fresh stack for three consecutive timed
// loops of 10^7 switches, and every loop is printed (a variant that is fast in its first loop only
// shows up). The variants are the ones the runtime uses on each path:
//   - "ccoro_switch, one call site": both sides run the same loop through the same calls, so
//     every `ret` returns where the return-stack predictor expects (the runtime's
//     coroutine-to-coroutine switch, both sides suspended in switchAway through the same calls,
//     as in `Coroutine.yield`; where the two call chains differ higher up, one return further up
//     misses, whichever variant is used — a jump there mispredicts every later return instead);
//   - "ccoro_switch_jump": the two sides switch from different places, ending in an indirect jump
//     (the runtime's switches between the loop and a coroutine, and into fresh coroutine stacks);
//   - "ccoro_switch_swap": the switch between a generator's next() and its yield: one context word
//     for both sides, an indirect jump, and no floating-point control registers (body and
//     consumer share them), so it does less than Boost's and is shown for its own figure;
//   - "ccoro_switch, two call sites": `ret` where the predictor must miss (shown to say why the
//     runtime does not use it there);
//   - "boost jump_fcontext" (from different places, as Boost's own users do).
// Two conditions: "flags equal" clears MXCSR's sticky exception flags before each loop, so both
// sides hold the same MXCSR (Boost's best case); "flags differ" leaves the main side's flags as
// the printing left them while the fresh stack's saved MXCSR is the default, as happens in any
// program that has rounded a float before switching.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <xmmintrin.h>

typedef struct ccoro_context { void *sp; } ccoro_context;
void ccoro_switch(ccoro_context *from, const ccoro_context *to);
void ccoro_switch_jump(ccoro_context *from, const ccoro_context *to);
void ccoro_switch_swap(ccoro_context *ctx);
void ccoro_make(ccoro_context *ctx, void *stack_top, void (*entry)(void *), void *arg);

typedef void *fcontext_t;
typedef struct { fcontext_t fctx; void *data; } transfer_t;
transfer_t jump_fcontext(fcontext_t const to, void *vp);
fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));

enum { SHARED_RET, JUMP, SWAP, SPLIT_RET, BOOST, VARIANTS };
static const char *names[VARIANTS] = {
  "ccoro_switch, one call site", "ccoro_switch_jump", "ccoro_switch_swap", "ccoro_switch, two call sites",
  "boost jump_fcontext",
};
static const long switches = 10000000;   // per loop; a round trip is two

static ccoro_context main_ctx, coro_ctx;
static int variant;
static fcontext_t boost_ctx;

// The SHARED_RET variant: both sides run this same loop, so every `ret` — the switch's, and
// `hop`'s — returns to the address the return-stack predictor holds, as when two coroutines
// suspended through the same calls switch to each other.
__attribute__((noinline)) static void hop(ccoro_context *from, const ccoro_context *to) {
  ccoro_switch(from, to);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void shared_loop(ccoro_context *from, const ccoro_context *to, long rounds) {
  for (long i = 0; i < rounds; i++) hop(from, to);
}

static void coro_entry(void *arg) {
  (void)arg;
  for (;;) {
    switch (variant) {
    case SHARED_RET: shared_loop(&coro_ctx, &main_ctx, switches); break;   // the main side ends first
    case JUMP: ccoro_switch_jump(&coro_ctx, &main_ctx); break;
    case SWAP: ccoro_switch_swap(&coro_ctx); break;   // the one word of the pair
    default: ccoro_switch(&coro_ctx, &main_ctx); break;
    }
  }
}

static void boost_entry(transfer_t t) {
  for (;;) t = jump_fcontext(t.fctx, 0);
}

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// One timed loop: ns per switch.
static double timed_loop(int v) {
  variant = v;
  long rounds = switches / 2;
  uint64_t t0 = now();
  switch (v) {
  case SHARED_RET: shared_loop(&main_ctx, &coro_ctx, rounds); break;
  case JUMP: for (long i = 0; i < rounds; i++) ccoro_switch_jump(&main_ctx, &coro_ctx); break;
  case SWAP: for (long i = 0; i < rounds; i++) ccoro_switch_swap(&coro_ctx); break;
  case SPLIT_RET: for (long i = 0; i < rounds; i++) ccoro_switch(&main_ctx, &coro_ctx); break;
  case BOOST: for (long i = 0; i < rounds; i++) boost_ctx = jump_fcontext(boost_ctx, 0).fctx; break;
  }
  return (double)(now() - t0) / (double)switches;
}

int main(void) {
  enum { STACK = 1 << 16 };
  char *stacks = malloc(2 * STACK);
  if (!stacks) return 1;
  for (int condition = 0; condition < 2; condition++) {
    const char *label = condition == 0 ? "flags equal" : "flags differ";
    for (int v = 0; v < VARIANTS; v++) {
      // A fresh context per variant and condition, made with the default MXCSR (ccoro_make) or the
      // current one (make_fcontext stores it), flags clear.
      _mm_setcsr(_mm_getcsr() & ~0x3Fu);
      ccoro_make(&coro_ctx, stacks + STACK, coro_entry, 0);
      boost_ctx = make_fcontext(stacks + 2 * STACK, STACK, boost_entry);
      double ns[3];
      for (int loop = 0; loop < 3; loop++) {
        if (condition == 0) _mm_setcsr(_mm_getcsr() & ~0x3Fu);
        else _mm_setcsr(_mm_getcsr() | 0x20u);   // the precision flag, as after a rounded division
        ns[loop] = timed_loop(v);
      }
      double slowest = ns[0];
      for (int loop = 1; loop < 3; loop++) if (ns[loop] > slowest) slowest = ns[loop];
      printf("%-12s  %-30s  %6.2f  %6.2f  %6.2f  ns/switch   slowest %6.2f\n",
             label, names[v], ns[0], ns[1], ns[2], slowest);
    }
  }
  return 0;
}
