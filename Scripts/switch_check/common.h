// What the context-switch checks Scripts/arm64/switch_check.c and Scripts/x86_64/switch_check.c
// share: the switches among three contexts and the checks after each, the checks at a fresh
// context's entry, the unwind walks, and the reporting. Each of the two defines its registers
// (names, how many), the wording of a few messages and its summary line, includes this file, then
// defines the asm that loads and reads the registers around a switch, its entry stub and what it
// plants above B's first frame (the list is under "Defined by the including file" below); its own
// comment says what they are on its architecture.
//
// * Registers. Three contexts, main and two coroutines A and B made by ccoro_make, switch among
//   themselves 10^6 times in all: in phases of 1,000 switches, the cycle main -> A -> B -> main,
//   the reverse cycle main -> B -> A -> main, and a pseudo-random order; every ordered pair occurs
//   through both ccoro_switch and ccoro_switch_jump. Before each switch the side that switches
//   away loads values of its own (different for every switch) into every callee-saved register
//   (reg_names), and one of two values of its own into each floating-point control register
//   (controls; control k takes bit k of the switch's number to choose, so that the combinations
//   vary); the contexts that run in the meantime load theirs. When it is switched back to, it
//   checks that all of them (of a control register, the bits its `compared` mask selects) and the
//   stack pointer hold what it left there, and that it is the context that was switched to. What
//   a switch must keep of the return address is proven by the switch returning to the instruction
//   after its call with the stack pointer and the registers above intact.
// * The swap. Then main and a fourth context S switch only to each other through
//   ccoro_switch_swap (a generator's consumer and body), 10^5 times each way, through one context
//   word: the callee-saved registers and the stack pointer are checked as above; the control
//   registers must hold what the side that switched back held (the pair shares them), S must
//   start with main's, and unwinding from S ends at its first frame.
// * Entry. A fresh context's entry (entry_stub: it records its first instruction's state in
//   switch_check_entry, then tail-jumps to coroutine_entry) starts with the stack pointer aligned
//   as the ABI requires at a function's first instruction (checked by the stub, which calls
//   entry_misaligned, before compiled code runs on a misaligned stack) inside its own stack, the
//   frame pointer 0 (a frame-pointer walk stops there), a return address into ccoro_trampoline,
//   each control register at the default ccoro_make lays out (`initial`; not the value of the
//   context that switched to it) and its argument in the first argument register.
//   A's stack top is given unaligned (ccoro_make aligns it); A is first entered through
//   ccoro_switch, B through ccoro_switch_jump.
// * Unwind. From inside each coroutine's entry function, at its start and again after 1,000 of
//   its switches, _Unwind_Backtrace walks the stack: the walk must end (_URC_END_OF_STACK, no frame
//   repeated, at most 16 frames) with every frame's CFA on the coroutine's own stack, the last
//   frame with a return address in ccoro_trampoline, only a zero return address after it, and
//   coroutine_entry just above it. Both stacks have 4 KiB of zeros above their top; B's has, just
//   below its top, what fill_above_first_frame plants instead of ccoro_make's zeros: a caller that
//   a walk going past the trampoline would find plausible.
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
void ccoro_switch_swap(ccoro_context *ctx, const ccoro_context *unused);   // reads only its first argument
void ccoro_make(ccoro_context *ctx, void *stack_top, void (*entry)(void *), void *arg);
void ccoro_trampoline(void);   // the first frame of every fresh stack

enum { MAIN, A, B, NCTX, S = NCTX };
static const char *const names[NCTX + 1] = { "main", "A", "B", "S" };

// Defined by the including file before it includes this one:
//   NREGS, NCTLS            the callee-saved registers and floating-point control registers checked
//   SP_REG, FP_REG, ARG_REG the names of the stack pointer, frame pointer and first argument register
//   ENTRY_RA_FAILURE        "... 0x%llx ...": an entry's return address is not into ccoro_trampoline
//   ENTRY_MISALIGNED        what is wrong with an entry's stack pointer when entry_stub finds it misaligned
//   SUMMARY                 the line printed when every check holds (%llu switches, %llu the rarest pair's)
#if !defined(NREGS) || !defined(NCTLS) || !defined(SP_REG) || !defined(FP_REG) || !defined(ARG_REG) || \
    !defined(ENTRY_RA_FAILURE) || !defined(ENTRY_MISALIGNED) || !defined(SUMMARY)
#error "define NREGS, NCTLS, SP_REG, FP_REG, ARG_REG, ENTRY_RA_FAILURE, ENTRY_MISALIGNED and SUMMARY first"
#endif
_Static_assert(NREGS <= 32, "switch_to gives each register one of 32 values per switch and side");

// Registers before and after a switch: the callee-saved ones in reg_names' order, the control
// registers in controls' order, the stack pointer (offsets used by the including file's asm).
typedef struct held { uint64_t reg[NREGS]; uint64_t ctl[NCTLS]; uint64_t sp; } held;

// What call_switch gets.
struct switch_args {
  held *in;                 // +0: the values to load; the asm stores the stack pointer at the call in in->sp
  held *out;                // +8: what the registers hold when the switch has returned
  void (*fn)(ccoro_context *, const ccoro_context *);   // +16: ccoro_switch, ccoro_switch_jump or ccoro_switch_swap
  ccoro_context *from;      // +24
  const ccoro_context *to;  // +32
};
_Static_assert(offsetof(struct switch_args, out) == 8 && offsetof(struct switch_args, fn) == 16 &&
               offsetof(struct switch_args, from) == 24 && offsetof(struct switch_args, to) == 32,
               "switch_args offsets");

// What entry_stub finds at the first instruction of a fresh context's entry (offsets used by its
// asm): the stack pointer, the first argument register, the frame pointer, the return address
// and the control registers.
typedef struct entry_state { uint64_t sp, arg, fp, ra, ctl[NCTLS]; } entry_state;
_Static_assert(offsetof(entry_state, arg) == 8 && offsetof(entry_state, fp) == 16 && offsetof(entry_state, ra) == 24 &&
               offsetof(entry_state, ctl) == 32, "entry_stub offsets");
__attribute__((visibility("hidden"))) entry_state switch_check_entry;

// A floating-point control register: its name, the bits a switch must keep (the others, e.g.
// sticky exception flags, any side may change), the value ccoro_make lays out for a fresh context
// (and its spelling in messages: both from DEFAULT(value)), and two values of its own for each
// context.
struct control { const char *name; uint64_t compared, initial; const char *initial_text; uint64_t values[NCTX][2]; };
#define DEFAULT(value) (value), #value

// Defined by the including file after it includes this one.
static const char *const reg_names[NREGS];
static const struct control controls[NCTLS];
// Loads a->in's registers, records the stack pointer in a->in->sp, calls a->fn(a->from, a->to) and
// stores what the registers hold after it returns in *a->out.
static void call_switch(struct switch_args *a);
// The entry given to ccoro_make (described above).
static void entry_stub(void *arg);
// Stores, just below B's stack top where ccoro_make leaves zeros, a caller made of main's frame
// address and return address.
static void fill_above_first_frame(void **top, void *frame, void *ret);
// Puts the control registers back to their defaults.
static void restore_controls(void);

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

typedef struct context {
  ccoro_context ctx;
  char *stack;        // [stack, stack + size): the coroutine's stack
  size_t size;
  int started;
  int unwinds;        // unwind walks done from it
  entry_state entry;
} context;
static context contexts[NCTX + 1];

static int running = MAIN;       // the context that was switched to last
static uint64_t switches;        // switches so far
enum { VIA_SWITCH, VIA_JUMP, VIAS };
static const char *const via_names[VIAS] = { "ccoro_switch", "ccoro_switch_jump" };
static void (*const via_fns[VIAS])(ccoro_context *, const ccoro_context *) = { ccoro_switch, ccoro_switch_jump };
static uint64_t pairs[NCTX][NCTX][VIAS];   // switches from, to, through which function
static const uint64_t total_switches = 1000000;

static uint64_t mix(uint64_t z) {   // splitmix64's finalizer: distinct, unrelated values
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Switches from `self` to `to` through via_fns[via] holding values of its own in every
// callee-saved register and control register, and checks them when it is switched back to.
static void switch_to(int self, int to, int via) {
  held in, out;
  memset(&in, 0, sizeof in);     // zeros: the asm may load and store only a control register's low bytes
  memset(&out, 0, sizeof out);
  for (int i = 0; i < NREGS; i++) in.reg[i] = mix(((switches * NCTX + (uint64_t)self) << 5) + (uint64_t)i);
  for (int k = 0; k < NCTLS; k++) in.ctl[k] = controls[k].values[self][(switches >> k) & 1];
  uint64_t number = switches++;
  pairs[self][to][via]++;
  running = to;
  struct switch_args a = { &in, &out, via_fns[via], &contexts[self].ctx, &contexts[to].ctx };
  call_switch(&a);
  const char *how = via_names[via];
  CHECK(running == self, "switch %llu %s -> %s (%s): %s was resumed, not %s", (unsigned long long)number,
        names[self], names[to], how, names[self], names[running]);
  for (int i = 0; i < NREGS; i++)
    CHECK(out.reg[i] == in.reg[i], "switch %llu %s -> %s (%s): %s %s 0x%llx after switching back, expected 0x%llx",
          (unsigned long long)number, names[self], names[to], how, names[self], reg_names[i],
          (unsigned long long)out.reg[i], (unsigned long long)in.reg[i]);
  for (int k = 0; k < NCTLS; k++)
    CHECK((out.ctl[k] & controls[k].compared) == in.ctl[k],
          "switch %llu %s -> %s (%s): %s %s 0x%llx after switching back, expected 0x%llx", (unsigned long long)number,
          names[self], names[to], how, names[self], controls[k].name, (unsigned long long)out.ctl[k],
          (unsigned long long)in.ctl[k]);
  CHECK(out.sp == in.sp, "switch %llu %s -> %s (%s): %s " SP_REG " 0x%llx after switching back, expected 0x%llx",
        (unsigned long long)number, names[self], names[to], how, names[self], (unsigned long long)out.sp,
        (unsigned long long)in.sp);
}

static ccoro_context swap_word;        // the swap pair's one context: the switched-out side's
static uint64_t swap_held[NCTLS];      // the control registers the side that swapped last held
static uint64_t swaps;                 // swaps so far
static const uint64_t total_swaps = 200000;

static void check_unwind(int self, const char *when);

// Swaps from `self` (MAIN or S) to the other side holding values of its own in every
// callee-saved register and control register; when swapped back to, checks the registers and the
// stack pointer, and that the control registers hold what the other side held.
static void swap_to(int self) {
  held in, out;
  memset(&in, 0, sizeof in);
  memset(&out, 0, sizeof out);
  int row = self == S ? A : MAIN;   // S's control values are A's
  for (int i = 0; i < NREGS; i++) in.reg[i] = mix(((swaps * 2 + (uint64_t)(self == S)) << 5) + (uint64_t)i + (1ull << 40));
  for (int k = 0; k < NCTLS; k++) in.ctl[k] = swap_held[k] = controls[k].values[row][(swaps >> k) & 1];
  uint64_t number = swaps++;
  int to = self == S ? MAIN : S;
  running = to;
  struct switch_args a = { &in, &out, ccoro_switch_swap, &swap_word, NULL };
  call_switch(&a);
  CHECK(running == self, "swap %llu %s -> %s: %s was resumed, not %s", (unsigned long long)number, names[self],
        names[to], names[self], names[running]);
  for (int i = 0; i < NREGS; i++)
    CHECK(out.reg[i] == in.reg[i], "swap %llu %s -> %s: %s %s 0x%llx after swapping back, expected 0x%llx",
          (unsigned long long)number, names[self], names[to], names[self], reg_names[i],
          (unsigned long long)out.reg[i], (unsigned long long)in.reg[i]);
  for (int k = 0; k < NCTLS; k++)
    CHECK((out.ctl[k] & controls[k].compared) == (swap_held[k] & controls[k].compared),
          "swap %llu %s -> %s: %s %s 0x%llx after swapping back, expected 0x%llx, what %s held (shared)",
          (unsigned long long)number, names[self], names[to], names[self], controls[k].name,
          (unsigned long long)out.ctl[k], (unsigned long long)swap_held[k], names[to]);
  CHECK(out.sp == in.sp, "swap %llu %s -> %s: %s " SP_REG " 0x%llx after swapping back, expected 0x%llx",
        (unsigned long long)number, names[self], names[to], names[self], (unsigned long long)out.sp,
        (unsigned long long)in.sp);
}

// Runs side `self` of the swap pair until main has seen total_swaps.
__attribute__((noinline)) static void run_swap(int self) {
  for (uint64_t turn = 1;; turn++) {
    if (self == MAIN && swaps >= total_swaps) return;
    swap_to(self);
    if (self == S && turn == 1000) check_unwind(S, "after 1000 of its swaps");
  }
}

static uint64_t rng = 0x243F6A8885A308D3ull;

// The next context to switch to from `self`, and through which function.
static int pick_target(int self, int *via) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;   // xorshift64
  int to;
  switch ((switches / 1000) % 3) {
    case 0: to = (self + 1) % NCTX; break;                       // main -> A -> B -> main
    case 1: to = (self + 2) % NCTX; break;                       // main -> B -> A -> main
    default: to = (self + 1 + (int)((rng >> 32) & 1)) % NCTX;    // any other context
  }
  *via = (int)((rng >> 40) % VIAS);
  if (!contexts[to].started) *via = to == B ? VIA_JUMP : VIA_SWITCH;   // A is entered through ccoro_switch, B through ccoro_switch_jump
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
    int via;
    int to = pick_target(self, &via);
    switch_to(self, to, via);
    if (self != MAIN && turn == 1000) check_unwind(self, "after 1000 of its switches");
  }
}

// Reports a fresh context entered with a misaligned stack pointer and stops: compiled code assumes
// the alignment (the including file's ENTRY_MISALIGNED says how it relies on it), so nothing after
// this would be meaningful. entry_stub calls it on a stack it has aligned.
__attribute__((noreturn, used)) void entry_misaligned(void) {
  printf("FAIL: %s: entry started with " SP_REG " 0x%llx, " ENTRY_MISALIGNED "\n", names[running],
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
  CHECK(c->entry.arg == (uint64_t)c, "%s: entry started with " ARG_REG " 0x%llx, expected %p", names[self],
        (unsigned long long)c->entry.arg, (void *)c);
  CHECK(c->entry.sp > (uint64_t)c->stack && c->entry.sp < (uint64_t)(c->stack + c->size),
        "%s: entry started with " SP_REG " 0x%llx, outside its stack", names[self], (unsigned long long)c->entry.sp);
  CHECK(c->entry.fp == 0, "%s: entry started with " FP_REG " 0x%llx, not 0 (a frame-pointer walk would go on)",
        names[self], (unsigned long long)c->entry.fp);
  CHECK(returns_into(c->entry.ra, ccoro_trampoline), "%s: " ENTRY_RA_FAILURE, names[self],
        (unsigned long long)c->entry.ra);
  for (int k = 0; k < NCTLS; k++) {
    if (self == S)   // a swap carries the control registers over
      CHECK((c->entry.ctl[k] & controls[k].compared) == (swap_held[k] & controls[k].compared),
            "S: entry started with %s 0x%llx, not main's 0x%llx", controls[k].name,
            (unsigned long long)c->entry.ctl[k], (unsigned long long)swap_held[k]);
    else
      CHECK(c->entry.ctl[k] == controls[k].initial, "%s: entry started with %s 0x%llx, not the default %s",
            names[self], controls[k].name, (unsigned long long)c->entry.ctl[k], controls[k].initial_text);
  }
  check_unwind(self, "at the start of its entry");
  if (self == S) run_swap(S);
  run(self);
  printf("FAIL: %s: run returned\n", names[self]);
  exit(1);
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
      fill_above_first_frame((void **)top, __builtin_frame_address(0), __builtin_return_address(0));
    }
  }
  run(MAIN);
  context *sc = &contexts[S];
  sc->size = 64 * 1024;
  sc->stack = aligned_alloc(16, sc->size + 4096);
  memset(sc->stack, 0, sc->size + 4096);
  ccoro_make(&swap_word, sc->stack + sc->size, entry_stub, sc);
  run_swap(MAIN);
  restore_controls();
  CHECK(sc->started, "S never started");
  CHECK(sc->unwinds == 2, "S: %d unwinds, expected 2", sc->unwinds);
  for (int i = A; i <= B; i++) {
    CHECK(contexts[i].started, "%s never started", names[i]);
    CHECK(contexts[i].unwinds == 2, "%s: %d unwinds, expected 2", names[i], contexts[i].unwinds);
  }
  uint64_t fewest = UINT64_MAX;   // switches of the rarest from/to/function combination
  for (int f = 0; f < NCTX; f++)
    for (int t = 0; t < NCTX; t++)
      for (int j = 0; j < VIAS && f != t; j++) {
        CHECK(pairs[f][t][j] > 0, "no switch %s -> %s through %s", names[f], names[t], via_names[j]);
        if (pairs[f][t][j] < fewest) fewest = pairs[f][t][j];
      }
  if (failures) finish_failed();
  printf(SUMMARY "\n", (unsigned long long)switches, (unsigned long long)fewest, (unsigned long long)swaps);
  return 0;
}
