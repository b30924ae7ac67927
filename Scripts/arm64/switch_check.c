// Executes the arm64 context switch (Sources/CCoroutines/context_arm64.S) under qemu-aarch64 in CI
// (Scripts/arm64/check.sh) and checks what AAPCS64 and the runtime require of it:
//
// * Registers. Three contexts, main and two coroutines A and B made by ccoro_make, switch among
//   themselves 10^6 times in all: in phases of 1,000 switches, the cycle main -> A -> B -> main,
//   the reverse cycle main -> B -> A -> main, and a pseudo-random order; every ordered pair occurs
//   through both ccoro_switch and ccoro_switch_jump. Before each switch the side that switches
//   away loads values of its own (different for every switch) into x19-x28, the frame pointer x29
//   and d8-d15, and one of two FPCR values of its own (rounding mode, FZ, DN, AHP; six values in
//   all); the contexts that run in the meantime load theirs. When it is switched back to, it
//   checks that all of them and sp hold what it left there, and that it is the context that was
//   switched to. x30 (the link register) need not survive a call: what a switch must keep of it is
//   its return address, and the switch returning to the instruction after its call, with sp and
//   the registers above intact, is that proof.
// * Entry. A fresh context's entry (an asm stub that records its first instruction's state, then
//   tail-jumps to coroutine_entry) starts with sp 16-byte aligned (checked by the stub, before
//   compiled code runs on a misaligned stack) inside its own stack, x29 = 0 (a
//   frame-pointer walk stops there), x30 = a return address inside ccoro_trampoline, FPCR = 0 (the
//   default ccoro_make lays out, not the FPCR of the context that switched to it) and its argument.
//   A's stack top is given unaligned (ccoro_make aligns it); A is first entered through
//   ccoro_switch, B through ccoro_switch_jump.
// * Unwind. From inside each coroutine's entry function, at its start and again after 1,000 of
//   its switches, _Unwind_Backtrace walks the stack: the walk must end (_URC_END_OF_STACK, no frame
//   repeated, at most 16 frames) with every frame's CFA on the coroutine's own stack, the last
//   frame with a return address in ccoro_trampoline, only a zero return address after it, and
//   coroutine_entry just above it. ccoro_trampoline ends the walk by marking x30 undefined in its
//   CFI (`.cfi_undefined x30`: the unwinder takes the return address as 0, end of stack); without
//   that, x30's rule would be "same value" and the walk would find the trampoline again and again.
//   The 16 bytes above B's first frame hold a frame record into main's caller instead of
//   ccoro_make's zeros (the DWARF walk does not read them; x29 = 0 keeps frame-pointer walks off
//   them), so that a walk going past the trampoline would find a plausible caller.
//
// Exit status 0 when every check holds; each failure prints a line (the run stops after 40; a
// crash, e.g. of the unwinder, exits non-zero too, after the lines printed so far).
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

typedef struct ccoro_context { void *sp; } ccoro_context;
void ccoro_switch(ccoro_context *from, const ccoro_context *to);
void ccoro_switch_jump(ccoro_context *from, const ccoro_context *to);
void ccoro_make(ccoro_context *ctx, void *stack_top, void (*entry)(void *), void *arg);
void ccoro_trampoline(void);   // the first frame of every fresh stack

enum { MAIN, A, B, NCTX };
static const char *const names[NCTX] = { "main", "A", "B" };

static int failures;
static const int max_failures = 40;

__attribute__((noreturn)) static void finish_failed(void) {
  printf("%d checks failed\n", failures);
  fflush(stdout);
  exit(1);
}

#define CHECK(cond, ...) do { if (!(cond)) { \
  if (++failures <= max_failures) { printf("FAIL: " __VA_ARGS__); printf("\n"); } \
  if (failures >= max_failures) finish_failed(); } } while (0)

// What entry_stub finds at the first instruction of a fresh context's entry (offsets used by its asm).
typedef struct entry_state { uint64_t sp, x0, fp, lr, fpcr; } entry_state;
_Static_assert(offsetof(entry_state, x0) == 8 && offsetof(entry_state, fp) == 16 &&
               offsetof(entry_state, lr) == 24 && offsetof(entry_state, fpcr) == 32, "entry_stub offsets");
__attribute__((visibility("hidden"))) entry_state switch_check_entry;

typedef struct context {
  ccoro_context ctx;
  char *stack;        // [stack, stack + size): the coroutine's stack
  size_t size;
  int started;
  int unwinds;        // unwind walks done from it
  entry_state entry;
} context;
static context contexts[NCTX];

static int running = MAIN;       // the context that was switched to last
static uint64_t switches;        // switches so far
static uint64_t pairs[NCTX][NCTX][2];   // switches from, to, through ccoro_switch_jump
static const uint64_t total_switches = 1000000;

// FPCR values (RMode bits 22-23, FZ 24, DN 25, AHP 26): two of its own for each context.
static const uint64_t fpcr_values[NCTX][2] = {
  { 1ull << 22, (1ull << 22) | (1ull << 25) },
  { (2ull << 22) | (1ull << 24), (2ull << 22) | (1ull << 26) },
  { 3ull << 22, (3ull << 22) | (1ull << 24) | (1ull << 25) },
};

static uint64_t mix(uint64_t z) {   // splitmix64's finalizer: distinct, unrelated values
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// x19..x28, x29 at 0..80, d8..d15 at 88..144, FPCR at 152, sp at 160 (offsets used by the asm).
typedef struct held { uint64_t x[11]; uint64_t d[8]; uint64_t fpcr; uint64_t sp; } held;
struct switch_args {
  const uint64_t *values;   // +0: x19..x29, d8..d15 (held's layout)
  uint64_t fpcr;            // +8
  held *out;                // +16
  void (*fn)(ccoro_context *, const ccoro_context *);   // +24
  ccoro_context *from;      // +32
  const ccoro_context *to;  // +40
  uint64_t sp;              // +48: sp at the call
};
_Static_assert(offsetof(held, d) == 88 && offsetof(held, fpcr) == 152 && offsetof(held, sp) == 160, "held offsets");
_Static_assert(offsetof(struct switch_args, sp) == 48, "switch_args offsets");

// Switches from `self` to `to` (through ccoro_switch_jump if `jump`) holding values of its own in
// every callee-saved register and FPCR, and checks them when it is switched back to.
static void switch_to(int self, int to, int jump) {
  uint64_t values[19];
  for (int i = 0; i < 19; i++) values[i] = mix(((switches * NCTX + (uint64_t)self) << 5) + (uint64_t)i);
  uint64_t fpcr = fpcr_values[self][switches & 1];
  uint64_t number = switches++;
  pairs[self][to][jump]++;
  running = to;
  held out;
  struct switch_args a = { values, fpcr, &out, jump ? ccoro_switch_jump : ccoro_switch, &contexts[self].ctx,
                           &contexts[to].ctx, 0 };
  // The arguments travel in x8, the only general register not declared clobbered; the asm keeps
  // it, and the compiler's x29 (not declarable as clobbered), on the stack across the call.
  register struct switch_args *ap __asm__("x8") = &a;
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
      "ldr x10, [x8, #8]\n"
      "msr fpcr, x10\n"
      "mov x10, sp\n"
      "str x10, [x8, #48]\n"
      "ldr x0, [x8, #32]\n"
      "ldr x1, [x8, #40]\n"
      "ldr x11, [x8, #24]\n"
      "blr x11\n"
      "mov x10, sp\n"
      "mov x11, x29\n"
      "ldp x29, x8, [sp], #16\n"
      "ldr x9, [x8, #16]\n"
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
  const char *how = jump ? "ccoro_switch_jump" : "ccoro_switch";
  CHECK(running == self, "switch %llu %s -> %s (%s): %s was resumed, not %s", (unsigned long long)number,
        names[self], names[to], how, names[self], names[running]);
  for (int i = 0; i < 11; i++)
    CHECK(out.x[i] == values[i], "switch %llu %s -> %s (%s): %s x%d 0x%llx after switching back, expected 0x%llx",
          (unsigned long long)number, names[self], names[to], how, names[self], 19 + i,
          (unsigned long long)out.x[i], (unsigned long long)values[i]);
  for (int i = 0; i < 8; i++)
    CHECK(out.d[i] == values[11 + i], "switch %llu %s -> %s (%s): %s d%d 0x%llx after switching back, expected 0x%llx",
          (unsigned long long)number, names[self], names[to], how, names[self], 8 + i,
          (unsigned long long)out.d[i], (unsigned long long)values[11 + i]);
  CHECK(out.fpcr == fpcr, "switch %llu %s -> %s (%s): %s FPCR 0x%llx after switching back, expected 0x%llx",
        (unsigned long long)number, names[self], names[to], how, names[self], (unsigned long long)out.fpcr,
        (unsigned long long)fpcr);
  CHECK(out.sp == a.sp, "switch %llu %s -> %s (%s): %s sp 0x%llx after switching back, expected 0x%llx",
        (unsigned long long)number, names[self], names[to], how, names[self], (unsigned long long)out.sp,
        (unsigned long long)a.sp);
}

static uint64_t rng = 0x243F6A8885A308D3ull;

// The next context to switch to from `self`, and through which function.
static int pick_target(int self, int *jump) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;   // xorshift64
  int to;
  switch ((switches / 1000) % 3) {
    case 0: to = (self + 1) % NCTX; break;                       // main -> A -> B -> main
    case 1: to = (self + 2) % NCTX; break;                       // main -> B -> A -> main
    default: to = (self + 1 + (int)((rng >> 32) & 1)) % NCTX;    // any other context
  }
  *jump = (int)((rng >> 40) & 1);
  if (!contexts[to].started) *jump = to == B;   // A is entered through ccoro_switch, B through ccoro_switch_jump
  return to;
}

// Whether `pc` (a return address) lies in the function that starts at `fn`, by the FDE the
// unwinder finds for it.
static int returns_into(uint64_t pc, void (*fn)(void)) {
  return pc != 0 && _Unwind_FindEnclosingFunction((void *)pc) == (void *)fn;
}

#define MAX_FRAMES 16
struct walk { int n, looped, runaway; uint64_t ip[MAX_FRAMES], cfa[MAX_FRAMES]; };

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *uc, void *p) {
  struct walk *w = p;
  uint64_t ip = _Unwind_GetIP(uc), cfa = _Unwind_GetCFA(uc);
  if (w->n > 0 && ip == w->ip[w->n - 1] && cfa == w->cfa[w->n - 1]) { w->looped = 1; return _URC_NORMAL_STOP; }
  if (w->n == MAX_FRAMES) { w->runaway = 1; return _URC_NORMAL_STOP; }
  w->ip[w->n] = ip;
  w->cfa[w->n] = cfa;
  w->n++;
  return _URC_NO_REASON;
}

void coroutine_entry(void *arg);

// Walks the stack of coroutine `self` from here and checks that the walk ends at its first frame.
__attribute__((noinline)) static void check_unwind(int self, const char *when) {
  context *c = &contexts[self];
  struct walk w = { 0 };
  _Unwind_Reason_Code rc = _Unwind_Backtrace(walk_frame, &w);
  c->unwinds++;
  int before = failures;
  CHECK(!w.looped, "unwind from %s %s: frame %d repeats frame %d (ip 0x%llx): the walk loops", names[self], when,
        w.n, w.n - 1, (unsigned long long)w.ip[w.n - 1]);
  CHECK(!w.runaway, "unwind from %s %s: no end after %d frames", names[self], when, MAX_FRAMES);
  CHECK(rc == _URC_END_OF_STACK, "unwind from %s %s: _Unwind_Backtrace returned %d, not _URC_END_OF_STACK (%d)",
        names[self], when, (int)rc, (int)_URC_END_OF_STACK);
  int last = w.n - 1;   // the last frame with a return address
  while (last >= 0 && w.ip[last] == 0) last--;
  CHECK(last >= 1 && returns_into(w.ip[last], ccoro_trampoline),
        "unwind from %s %s: the last frame returns to 0x%llx, not into ccoro_trampoline", names[self], when,
        last >= 0 ? (unsigned long long)w.ip[last] : 0ull);
  CHECK(last >= 1 && returns_into(w.ip[last - 1], (void (*)(void))coroutine_entry),
        "unwind from %s %s: the frame above the trampoline's returns to 0x%llx, not into coroutine_entry",
        names[self], when, last >= 1 ? (unsigned long long)w.ip[last - 1] : 0ull);
  CHECK(w.n - 1 - last <= 1, "unwind from %s %s: %d frames after the trampoline's", names[self], when, w.n - 1 - last);
  for (int i = 0; i < w.n; i++)
    CHECK(w.cfa[i] > (uint64_t)c->stack && w.cfa[i] <= (uint64_t)(c->stack + c->size),
          "unwind from %s %s: frame %d (ip 0x%llx) has CFA 0x%llx, off the coroutine's stack [%p, %p)", names[self],
          when, i, (unsigned long long)w.ip[i], (unsigned long long)w.cfa[i], (void *)c->stack,
          (void *)(c->stack + c->size));
  if (failures != before)
    for (int i = 0; i < w.n; i++)
      printf("  frame %d: ip 0x%llx cfa 0x%llx\n", i, (unsigned long long)w.ip[i], (unsigned long long)w.cfa[i]);
}

// Runs context `self`: switches to the next context until main has seen total_switches.
__attribute__((noinline)) static void run(int self) {
  for (uint64_t turn = 1;; turn++) {
    if (self == MAIN && switches >= total_switches) return;
    int jump;
    int to = pick_target(self, &jump);
    switch_to(self, to, jump);
    if (self != MAIN && turn == 1000) check_unwind(self, "after 1000 of its switches");
  }
}

// Reports a fresh context entered with sp not 16-byte aligned and stops: compiled code assumes
// the alignment (clang computes addresses of stack objects with `orr`), so nothing after this would
// be meaningful.
__attribute__((noreturn, used)) void entry_misaligned(void) {
  printf("FAIL: %s: entry started with sp 0x%llx, not 16-byte aligned\n", names[running],
         (unsigned long long)switch_check_entry.sp);
  failures++;
  finish_failed();
}

// A fresh context's entry function: entry_stub records the registers it starts with and jumps here.
__attribute__((noinline)) void coroutine_entry(void *arg) {
  int self = running;
  context *c = &contexts[self];
  c->entry = switch_check_entry;
  c->started = 1;
  CHECK(arg == c, "%s: entry received arg %p, expected %p", names[self], arg, (void *)c);
  CHECK(c->entry.x0 == (uint64_t)c, "%s: entry started with x0 0x%llx, expected %p", names[self],
        (unsigned long long)c->entry.x0, (void *)c);
  CHECK(c->entry.sp > (uint64_t)c->stack && c->entry.sp < (uint64_t)(c->stack + c->size),
        "%s: entry started with sp 0x%llx, outside its stack", names[self], (unsigned long long)c->entry.sp);
  CHECK(c->entry.fp == 0, "%s: entry started with x29 0x%llx, not 0 (a frame-pointer walk would go on)", names[self],
        (unsigned long long)c->entry.fp);
  CHECK(returns_into(c->entry.lr, ccoro_trampoline),
        "%s: entry started with x30 0x%llx, not a return into ccoro_trampoline", names[self],
        (unsigned long long)c->entry.lr);
  CHECK(c->entry.fpcr == 0, "%s: entry started with FPCR 0x%llx, not the default 0", names[self],
        (unsigned long long)c->entry.fpcr);
  check_unwind(self, "at the start of its entry");
  run(self);
  printf("FAIL: %s: run returned\n", names[self]);
  exit(1);
}

// The entry given to ccoro_make: records sp, x0, x29, x30 and FPCR as the trampoline leaves them,
// then tail-jumps to coroutine_entry (so no frame of its own appears in a walk), or, if sp is not
// 16-byte aligned, aligns it and calls entry_misaligned.
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

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: still running after 120 s\n";
  write(1, msg, sizeof msg - 1);
  _exit(1);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);   // the lines printed before a crash are kept
  signal(SIGALRM, on_alarm);
  alarm(120);
  contexts[MAIN].started = 1;
  for (int i = A; i <= B; i++) {
    context *c = &contexts[i];
    c->size = 64 * 1024;
    // 4 KiB of zeros above the top belong to no stack: a walk that runs past the top reads zeros
    // there (and is reported) rather than whatever the heap holds (and crashes in the unwinder).
    c->stack = aligned_alloc(16, c->size + 4096);
    memset(c->stack, 0, c->size + 4096);
    char *top = c->stack + c->size;
    if (i == A) {
      ccoro_make(&c->ctx, top - 8, entry_stub, c);   // an odd top: ccoro_make must align it down itself
    } else {
      ccoro_make(&c->ctx, top, entry_stub, c);
      // Above the first frame: a frame record into main's caller instead of zeros.
      ((void **)top)[-2] = __builtin_frame_address(0);
      ((void **)top)[-1] = __builtin_return_address(0);
    }
  }
  run(MAIN);
  __asm__ volatile("msr fpcr, xzr");
  for (int i = A; i <= B; i++) {
    CHECK(contexts[i].started, "%s never started", names[i]);
    CHECK(contexts[i].unwinds == 2, "%s: %d unwinds, expected 2", names[i], contexts[i].unwinds);
  }
  uint64_t fewest = UINT64_MAX;   // switches of the rarest from/to/function combination
  for (int f = 0; f < NCTX; f++)
    for (int t = 0; t < NCTX; t++)
      for (int j = 0; j < 2 && f != t; j++) {
        CHECK(pairs[f][t][j] > 0, "no switch %s -> %s through %s", names[f], names[t],
              j ? "ccoro_switch_jump" : "ccoro_switch");
        if (pairs[f][t][j] < fewest) fewest = pairs[f][t][j];
      }
  if (failures) finish_failed();
  printf("arm64 switch: %llu switches among main, A and B (cycles both ways and a pseudo-random order, every pair "
         "through ccoro_switch and ccoro_switch_jump, each at least %llu times) kept x19-x29, d8-d15, FPCR and sp of "
         "each side; fresh contexts entered 16-byte aligned with x29 = 0, x30 in ccoro_trampoline, FPCR 0 and their "
         "argument; unwinds from A and B ended at ccoro_trampoline (4 walks)\n",
         (unsigned long long)switches, (unsigned long long)fewest);
  return 0;
}
