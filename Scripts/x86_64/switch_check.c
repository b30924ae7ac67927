// Executes the x86_64 context switch (Sources/CCoroutines/context_x86_64.S) natively in CI
// (Scripts/x86_64/check.sh) and checks what the System V ABI and the runtime require of it. The
// companion of Scripts/arm64/switch_check.c:
//
// * Registers. Three contexts, main and two coroutines A and B made by ccoro_make, switch among
//   themselves 10^6 times in all: in phases of 1,000 switches, the cycle main -> A -> B -> main,
//   the reverse cycle main -> B -> A -> main, and a pseudo-random order; every ordered pair occurs
//   through both ccoro_switch and ccoro_switch_jump. Before each switch the side that switches
//   away loads values of its own (different for every switch) into rbx, rbp and r12-r15, and one
//   of two MXCSR values (rounding, FTZ, DAZ) and x87 control words (rounding, precision) of its own
//   (six of each in all); the contexts that run in the meantime load theirs. When it is switched
//   back to, it checks that all of them (MXCSR without its exception flags, which any side may
//   raise) and rsp hold what it left there, and that it is the context that was switched to. The
//   return address is proven by the switch returning to the instruction after its call with rsp
//   and the registers above intact.
// * Entry. A fresh context's entry (an asm stub that records its first instruction's state, then
//   tail-jumps to coroutine_entry) starts with rsp aligned as after a call ((rsp + 8) % 16 == 0;
//   checked by the stub, before compiled code runs on a misaligned stack) inside its own stack,
//   rbp = 0 (a frame-pointer walk stops there), a return address into ccoro_trampoline at (rsp),
//   the default MXCSR 0x1F80 and x87 control word 0x037F that ccoro_make lays out (not those of
//   the context that switched to it) and its argument in rdi.
//   A's stack top is given unaligned (ccoro_make aligns it); A is first entered through
//   ccoro_switch, B through ccoro_switch_jump.
// * Unwind. From inside each coroutine's entry function, at its start and again after 1,000 of
//   its switches, _Unwind_Backtrace walks the stack: the walk must end (_URC_END_OF_STACK, no frame
//   repeated, at most 16 frames) with every frame's CFA on the coroutine's own stack, the last
//   frame with a return address in ccoro_trampoline, only a zero return address after it, and
//   coroutine_entry just above it. ccoro_trampoline ends the walk by marking the return address
//   undefined in its CFI (`.cfi_undefined %rip`: the unwinder takes it as 0, end of stack).
//   ccoro_make also leaves a zero word where the trampoline's return address would be, which would
//   stop the walk too: B's stack has a return address into main's caller in that word instead, so
//   nothing but the CFI can stop the walk there.
//
// Exit status 0 when every check holds; each failure prints a line (the run stops after 40; a
// crash, e.g. of the unwinder, exits non-zero too, after the lines printed so far).
// Built with -fomit-frame-pointer (so that the asm may clobber rbp) and -mno-red-zone (it pushes).
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
typedef struct entry_state { uint64_t sp, rdi, fp, ra; uint32_t mxcsr; uint16_t cw; } entry_state;
_Static_assert(offsetof(entry_state, rdi) == 8 && offsetof(entry_state, fp) == 16 && offsetof(entry_state, ra) == 24 &&
               offsetof(entry_state, mxcsr) == 32 && offsetof(entry_state, cw) == 36, "entry_stub offsets");
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

// MXCSR (exceptions masked; DAZ bit 6, rounding bits 13-14, FTZ bit 15) and x87 control word
// (exceptions masked; precision bits 8-9, rounding bits 10-11) values: two of each per context.
static const uint32_t mxcsr_values[NCTX][2] = {
  { 0x1F80 | (1u << 13), 0x1F80 | (1u << 13) | (1u << 6) },
  { 0x1F80 | (2u << 13) | (1u << 15), 0x1F80 | (2u << 13) },
  { 0x1F80 | (3u << 13), 0x1F80 | (3u << 13) | (1u << 15) | (1u << 6) },
};
static const uint16_t cw_values[NCTX][2] = {
  { 0x037F | (1u << 10), 0x027F | (1u << 10) },
  { 0x037F | (2u << 10), 0x007F | (2u << 10) },
  { 0x037F | (3u << 10), 0x027F | (3u << 10) },
};

static uint64_t mix(uint64_t z) {   // splitmix64's finalizer: distinct, unrelated values
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// rbx, rbp, r12..r15 at 0..40, MXCSR at 48, x87 CW at 52, rsp at 56 (offsets used by the asm).
typedef struct held { uint64_t x[6]; uint32_t mxcsr; uint16_t cw; uint16_t pad; uint64_t sp; } held;
struct switch_args {
  const uint64_t *values;   // +0: rbx, rbp, r12..r15
  uint32_t mxcsr;           // +8
  uint16_t cw;              // +12
  held *out;                // +16
  void (*fn)(ccoro_context *, const ccoro_context *);   // +24
  ccoro_context *from;      // +32
  const ccoro_context *to;  // +40
  uint64_t sp;              // +48: rsp at the call
};
_Static_assert(offsetof(held, mxcsr) == 48 && offsetof(held, cw) == 52 && offsetof(held, sp) == 56, "held offsets");
_Static_assert(offsetof(struct switch_args, cw) == 12 && offsetof(struct switch_args, sp) == 48, "switch_args offsets");

// Switches from `self` to `to` (through ccoro_switch_jump if `jump`) holding values of its own in
// every callee-saved register, MXCSR and the x87 control word, and checks them when it is
// switched back to.
static void switch_to(int self, int to, int jump) {
  uint64_t values[6];
  for (int i = 0; i < 6; i++) values[i] = mix(((switches * NCTX + (uint64_t)self) << 3) + (uint64_t)i);
  uint32_t mxcsr = mxcsr_values[self][switches & 1];
  uint16_t cw = cw_values[self][(switches >> 1) & 1];
  uint64_t number = switches++;
  pairs[self][to][jump]++;
  running = to;
  held out;
  struct switch_args a = { values, mxcsr, cw, &out, jump ? ccoro_switch_jump : ccoro_switch, &contexts[self].ctx,
                           &contexts[to].ctx, 0 };
  struct switch_args *ap = &a;
  // The arguments travel in rax, kept on the stack across the call (pushed twice: the call keeps
  // 16-byte alignment). Everything the asm changes is declared clobbered.
  __asm__ volatile(
      "pushq %%rax\n"
      "pushq %%rax\n"
      "movq %%rsp, 48(%%rax)\n"
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
      "movq %%rsp, %%rcx\n"
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
      "movq %%rcx, 56(%%r11)\n"
      : "+a"(ap)
      :
      : "rbx", "rbp", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
  static const char *const regs[6] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };
  const char *how = jump ? "ccoro_switch_jump" : "ccoro_switch";
  CHECK(running == self, "switch %llu %s -> %s (%s): %s was resumed, not %s", (unsigned long long)number,
        names[self], names[to], how, names[self], names[running]);
  for (int i = 0; i < 6; i++)
    CHECK(out.x[i] == values[i], "switch %llu %s -> %s (%s): %s %s 0x%llx after switching back, expected 0x%llx",
          (unsigned long long)number, names[self], names[to], how, names[self], regs[i],
          (unsigned long long)out.x[i], (unsigned long long)values[i]);
  CHECK((out.mxcsr & ~0x3Fu) == mxcsr, "switch %llu %s -> %s (%s): %s MXCSR 0x%x after switching back, expected 0x%x",
        (unsigned long long)number, names[self], names[to], how, names[self], out.mxcsr, mxcsr);
  CHECK(out.cw == cw, "switch %llu %s -> %s (%s): %s x87 control word 0x%x after switching back, expected 0x%x",
        (unsigned long long)number, names[self], names[to], how, names[self], out.cw, cw);
  CHECK(out.sp == a.sp, "switch %llu %s -> %s (%s): %s rsp 0x%llx after switching back, expected 0x%llx",
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

// Reports a fresh context entered with rsp not aligned as after a call and stops: compiled code
// assumes the alignment (movaps to the stack faults), so nothing after this would be meaningful.
__attribute__((noreturn, used)) void entry_misaligned(void) {
  printf("FAIL: %s: entry started with rsp 0x%llx, not aligned as after a call ((rsp + 8) %% 16 != 0)\n",
         names[running], (unsigned long long)switch_check_entry.sp);
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
  CHECK(c->entry.rdi == (uint64_t)c, "%s: entry started with rdi 0x%llx, expected %p", names[self],
        (unsigned long long)c->entry.rdi, (void *)c);
  CHECK(c->entry.sp > (uint64_t)c->stack && c->entry.sp < (uint64_t)(c->stack + c->size),
        "%s: entry started with rsp 0x%llx, outside its stack", names[self], (unsigned long long)c->entry.sp);
  CHECK(c->entry.fp == 0, "%s: entry started with rbp 0x%llx, not 0 (a frame-pointer walk would go on)", names[self],
        (unsigned long long)c->entry.fp);
  CHECK(returns_into(c->entry.ra, ccoro_trampoline), "%s: entry's return address is 0x%llx, not into ccoro_trampoline",
        names[self], (unsigned long long)c->entry.ra);
  CHECK(c->entry.mxcsr == 0x1F80, "%s: entry started with MXCSR 0x%x, not the default 0x1F80", names[self],
        c->entry.mxcsr);
  CHECK(c->entry.cw == 0x037F, "%s: entry started with x87 control word 0x%x, not the default 0x037F", names[self],
        c->entry.cw);
  check_unwind(self, "at the start of its entry");
  run(self);
  printf("FAIL: %s: run returned\n", names[self]);
  exit(1);
}

// The entry given to ccoro_make: records rsp, rdi, rbp, the return address, MXCSR and the x87
// control word as the trampoline's call leaves them, then tail-jumps to coroutine_entry (so no
// frame of its own appears in a walk), or, if rsp is not aligned as after a call, aligns it and
// calls entry_misaligned.
__attribute__((naked)) static void entry_stub(void *arg) {
  __asm__ volatile(
      "movq %rsp, switch_check_entry(%rip)\n"
      "movq %rdi, switch_check_entry+8(%rip)\n"
      "movq %rbp, switch_check_entry+16(%rip)\n"
      "movq (%rsp), %rax\n"
      "movq %rax, switch_check_entry+24(%rip)\n"
      "stmxcsr switch_check_entry+32(%rip)\n"
      "fnstcw switch_check_entry+36(%rip)\n"
      "leaq 8(%rsp), %rax\n"
      "testq $15, %rax\n"
      "jnz 1f\n"
      "jmp coroutine_entry\n"
      "1: andq $-16, %rsp\n"
      "callq entry_misaligned\n"
      "ud2\n");
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
      // Where ccoro_make leaves zeros above the first frame: the trampoline's would-be return
      // address (at its CFA - 8, top - 16) is a return into main's caller, the word above a stack address.
      ((void **)top)[-2] = __builtin_return_address(0);
      ((void **)top)[-1] = __builtin_frame_address(0);
    }
  }
  run(MAIN);
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
  printf("x86_64 switch: %llu switches among main, A and B (cycles both ways and a pseudo-random order, every pair "
         "through ccoro_switch and ccoro_switch_jump, each at least %llu times) kept rbx, rbp, r12-r15, MXCSR, the "
         "x87 control word and rsp of each side; fresh contexts entered with (rsp + 8) %% 16 == 0, rbp = 0, a return "
         "into ccoro_trampoline, the default MXCSR and control word and their argument; unwinds from A and B ended at "
         "ccoro_trampoline (4 walks)\n",
         (unsigned long long)switches, (unsigned long long)fewest);
  return 0;
}
