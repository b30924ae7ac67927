// CCoroutines — the C and assembly floor of swift-coroutines. Not public API.
//
// * `ccoro_switch` / `ccoro_make`: the context switch (context_x86_64.S, context_arm64.S).
// * `ccoro_stack_*`: stacks with PROT_NONE guard regions, and slab stacks with canaries (stack.c).
// * `ccoro_signal_*`: the alternate signal stack and the stack-overflow reporter (signal.c).
// * `ccoro_fiber_*`: ThreadSanitizer / AddressSanitizer fiber annotations (fiber.c).
// * Thread-local slots behind static inline getters (do not touch the variables directly).
#ifndef CCOROUTINES_H
#define CCOROUTINES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A saved execution context: the stack pointer of a suspended stack. All registers the ABI
/// requires to survive a call are pushed on that stack by `ccoro_switch`.
typedef struct ccoro_context {
  void *sp;
} ccoro_context;

/// Saves the current registers on the current stack, stores the stack pointer in `from->sp`,
/// loads `to->sp` and returns into the context saved there.
void ccoro_switch(ccoro_context *from, const ccoro_context *to);
/// The same switch ending with an indirect jump instead of `ret` (x86_64): for switches whose two
/// sides are at different call sites (into a fresh stack, generator next()/yield), where `ret`
/// would miss the return-stack prediction every time. Identical to ccoro_switch on arm64.
void ccoro_switch_jump(ccoro_context *from, const ccoro_context *to);
/// ccoro_switch_jump with one context for both sides: loads the target's stack pointer from
/// `ctx`, stores the current one there, and switches. For two stacks that only ever switch to
/// each other (a generator's consumer and its body): `ctx` holds whichever side is switched out.
void ccoro_switch_swap(ccoro_context *ctx);

/// Lays out a first frame on a fresh stack so that switching to `ctx` calls `entry(arg)` on it.
/// `stack_top` must be 16-byte aligned. `entry` must never return.
void ccoro_make(ccoro_context *ctx, void *stack_top, void (*entry)(void *), void *arg);

// MARK: - Stacks

/// A stack: usable memory is [base, top); a guarded stack has a PROT_NONE region
/// [guard_lo, base); a slab stack has a canary word at `canary` instead.
typedef struct ccoro_stack {
  void *top;
  void *base;
  void *guard_lo;
  uint64_t *canary;   // NULL for guarded stacks
  size_t size;        // usable bytes
  void *mapping;      // guarded: the whole mapping; slab: the slab
  size_t mapping_size;
  size_t class_size;  // the size that was asked for (the pool key)
  int is_slab;
} ccoro_stack;

#define CCORO_GUARD_SIZE ((size_t)64 * 1024)
/// Stack tops are spread over this many bytes of address bits (a cache way), a page apart.
#define CCORO_COLOR_SPAN ((size_t)128 * 1024)
#define CCORO_CANARY_VALUE 0xC0C0A5A5DEADBEEFull

/// Maps a guarded stack of `size` usable bytes (a multiple of the page size) with a guard of at
/// least CCORO_GUARD_SIZE below it. Its top takes a new cache colour: a page offset modulo
/// CCORO_COLOR_SPAN, 7 pages on from the previous stack's (see stack.c). Returns 0 on success.
int ccoro_stack_map_guarded(size_t size, ccoro_stack *out);
/// Unmaps a guarded stack.
void ccoro_stack_unmap_guarded(ccoro_stack *stack);
/// Maps a slab of `count` stacks of at least `size` bytes (slots a page more apart, so that their
/// tops take successive cache colours) with one guard below the lowest; fills `out[0..<count]`.
/// Each stack's canary lives in the top 64 bytes of the stack below it (memory that stack has
/// already touched), so writing it costs no page. Returns 0 on success.
int ccoro_stack_map_slab(size_t size, size_t count, ccoro_stack *out);
/// Re-arms a slab stack's canary (call before each new use).
static inline void ccoro_stack_arm_canary(const ccoro_stack *s) {
  if (s->canary) *s->canary = CCORO_CANARY_VALUE;
}
/// Whether a slab stack's canary is intact (always true for guarded stacks).
static inline int ccoro_stack_canary_ok(const ccoro_stack *s) {
  return s->canary == NULL || *s->canary == CCORO_CANARY_VALUE;
}
/// Gives an idle stack's pages back to the kernel (they read as zero when touched again). For a
/// slab stack the top page is kept: it holds the canary of the stack above.
void ccoro_stack_release_memory(const ccoro_stack *stack);
/// The number of lines in /proc/self/maps (current mappings), or -1.
long ccoro_current_map_count(void);
/// vm.max_map_count, or -1 where there is no such limit.
long ccoro_max_map_count(void);
/// The page size.
size_t ccoro_page_size(void);

// MARK: - Thread-local slots (do not touch the variables directly)

/// What the signal handler needs to know about the coroutine running on this thread.
typedef struct ccoro_running {
  void *guard_lo;
  void *guard_hi;
  const char *name;     // NUL-terminated, owned by the coroutine
  size_t stack_size;
} ccoro_running;

#define CCORO_TLS __attribute__((tls_model("initial-exec"))) _Thread_local
extern CCORO_TLS void *ccoro_tls_coroutine_do_not_touch;
extern CCORO_TLS void *ccoro_tls_scheduler_do_not_touch;
extern CCORO_TLS const ccoro_running *ccoro_tls_running_do_not_touch;

static inline void *ccoro_tls_coroutine(void) { return ccoro_tls_coroutine_do_not_touch; }
static inline void ccoro_tls_set_coroutine(void *c, const ccoro_running *r) {
  ccoro_tls_coroutine_do_not_touch = c;
  ccoro_tls_running_do_not_touch = r;
}
static inline void *ccoro_tls_scheduler(void) { return ccoro_tls_scheduler_do_not_touch; }
static inline void ccoro_tls_set_scheduler(void *s) { ccoro_tls_scheduler_do_not_touch = s; }
/// The guard-region record the stack-overflow reporter consults on this thread (may be NULL).
static inline const ccoro_running *ccoro_tls_running(void) { return ccoro_tls_running_do_not_touch; }
/// Points the stack-overflow reporter at `r` without changing the current coroutine (generators).
static inline void ccoro_tls_set_running(const ccoro_running *r) { ccoro_tls_running_do_not_touch = r; }
/// A token that identifies the calling thread for as long as it lives: the address of one of its
/// thread-local slots (cheaper than a system call; compared, never dereferenced).
static inline const void *ccoro_thread_token(void) { return (const void *)&ccoro_tls_scheduler_do_not_touch; }
/// An address inside the calling function's frame: where the current stack pointer roughly is.
__attribute__((always_inline)) static inline const void *ccoro_frame_address(void) { return __builtin_frame_address(0); }
/// The stack pointer of the calling code (one register move where the architecture allows).
__attribute__((always_inline)) static inline const char *ccoro_stack_pointer(void) {
#if defined(__x86_64__)
  const char *sp;
  __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
  return sp;
#elif defined(__aarch64__)
  const char *sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  return sp;
#else
  return (const char *)__builtin_frame_address(0);
#endif
}
/// Reports that the stack pointer is below the running coroutine's stack (`r`) and aborts.
void ccoro_stack_bound_exceeded(const struct ccoro_running *r) __attribute__((noreturn, cold));
/// Aborts with the overflow report if the calling code runs below the lower bound of the stack of
/// the coroutine or generator running on this thread (nothing is checked on a thread's own
/// stack). The runtime's entry points call it: on a slab stack, which has no guard page, it finds
/// an overflow before the runtime writes below the bound, where a canary alone would find it only
/// at the next suspension, or never if a frame jumped over it. Two loads and a compare.
__attribute__((always_inline)) static inline void ccoro_check_stack_bound(void) {
  const struct ccoro_running *r = ccoro_tls_running_do_not_touch;
  if (__builtin_expect(r != 0 && ccoro_stack_pointer() < (const char *)r->guard_hi, 0)) ccoro_stack_bound_exceeded(r);
}

/// Everything a coroutine needs while it owns a stack, in manually allocated memory (never a
/// Swift class property, so `ccoro_switch` never receives the address of a property).
typedef struct ccoro_stack_record {
  ccoro_context context;
  ccoro_stack stack;
  ccoro_running running;
  void *fake_stack;   // AddressSanitizer's fake stack of this fiber while it is switched out
  void *fiber;        // ThreadSanitizer fiber, or NULL
} ccoro_stack_record;

// MARK: - Signals

/// Installs (once per process) the SIGSEGV/SIGBUS handler that reports guard-region hits, and
/// (once per thread) an alternate signal stack for the calling thread.
void ccoro_signal_prepare_thread(void);
/// Prints "coroutine stack overflow in '<name>' (stack size N bytes)" (and `why`) and aborts.
void ccoro_report_overflow(const char *name, size_t stack_size, const char *why) __attribute__((noreturn));

// MARK: - Swift object reference counts

/// The strong, unowned (plus one) and weak (plus one) reference counts of the Swift object
/// `object` (exported by the Swift runtime, libswiftCore: `swift/Runtime/HeapObject.h`). Each is
/// read on its own: together they are no snapshot of an object other threads can reach.
size_t swift_retainCount(void *object);
size_t swift_unownedRetainCount(void *object);
size_t swift_weakRetainCount(void *object);

/// Adds one strong reference to the Swift object `object` with a plain (non-atomic) increment of
/// its reference count: the runtime's `swift_nonatomic_retain` (libswiftCore,
/// `swift/Runtime/HeapObject.h`; the compiler calls it in code built with
/// `-assume-single-threaded`), behind a call the Swift optimiser cannot see through (it knows
/// that runtime function by name, and merged it with an atomic retain nearby). Sound only while
/// no other thread can reach the object, so that no other thread changes its count meanwhile
/// (Mailbox.swift, invariant 11).
void ccoro_retain_unshared(void *object);

/// The reference-count word of the Swift object `object`, the word after its metadata pointer
/// (`swift/stdlib/public/SwiftShims/RefCount.h`), loaded once, with acquire ordering (the
/// runtime's releases are release-ordered). It holds the strong and the unowned counts
/// together; an object that ever had a weak reference holds a side-table pointer there instead,
/// for good. So one load that finds the word of a fresh object (one strong reference, no unowned,
/// no side table: captured from one, checked by the counts above) proves that the caller's
/// reference is the only reference of any kind at that instant, and nobody can make another
/// (Mailbox.swift, invariant 10). A runtime that encoded the word otherwise would fail the
/// comparison, never pass it wrongly, unless it kept weak references out of this word; the tests
/// of invariant 10 keep an envelope by a weak reference to catch that.
static inline uint64_t ccoro_object_refcount_word(const void *object) {
  return __atomic_load_n((const uint64_t *)((const char *)object + sizeof(void *)), __ATOMIC_ACQUIRE);
}

// MARK: - Sanitizer fibers

/// Non-zero when this build has ThreadSanitizer or AddressSanitizer, i.e. when the fiber calls
/// below do anything (hot paths may skip them otherwise).
extern const int ccoro_fibers_active;
/// A sanitizer fiber handle for a stack (NULL when no sanitizer is active).
void *ccoro_fiber_create(void);
void ccoro_fiber_destroy(void *fiber);
/// The fiber of the calling thread's own stack.
void *ccoro_fiber_current(void);
/// Announces a switch to `fiber` whose stack is [bottom, bottom+size) (bottom NULL: a thread stack
/// already known to the sanitizer). Call right before `ccoro_switch`; `finishing` is non-zero when
/// the current stack is never resumed again.
void ccoro_fiber_will_switch(void *fiber, const void *bottom, size_t size, void **fake_stack, int finishing);
/// Clears AddressSanitizer's poison on a stack that is about to be reused: the last frames of its
/// previous user never returned, so their redzones are still marked (no-op without ASan).
void ccoro_stack_unpoison(const ccoro_stack *stack);
/// Call right after a `ccoro_switch` returns into a stack.
void ccoro_fiber_did_switch(void *fake_stack);
/// Like `ccoro_fiber_did_switch`, and also reports the bounds of the stack that was switched away
/// from (AddressSanitizer only; `*bottom_old` is NULL and `*size_old` 0 otherwise). Generators use
/// it to learn their consumer's stack without asking the system.
void ccoro_fiber_did_switch_from(void *fake_stack, const void **bottom_old, size_t *size_old);

// MARK: - Dispatch main queue (Linux libdispatch exports these for CoreFoundation)

/// The main queue's wake-up descriptor (an eventfd on Linux), or -1 where unavailable.
int ccoro_dispatch_main_queue_fd(void);
/// Drains blocks submitted to the main queue; main thread only.
void ccoro_dispatch_main_queue_drain(void);

// MARK: - Poller (epoll on Linux, kqueue on macOS)

/// Creates the poller and its wake-up descriptor(s); returns the poller fd or -1.
int ccoro_poll_create(int *wake_read, int *wake_write);
void ccoro_poll_wake(int wake_write);
void ccoro_poll_drain_wake(int wake_read);
/// Arms one-shot interest; returns 0 or errno.
int ccoro_poll_arm(int pfd, int fd, int readable, int writable);
void ccoro_poll_disarm(int pfd, int fd);
/// Watches `fd` for readability persistently (level-triggered); returns 0 or errno.
int ccoro_poll_watch(int pfd, int fd);
/// One event of `ccoro_poll_wait`: the 64-bit datum the descriptor was registered with
/// (`ccoro_poll_register`), or, for one-shot interest (`ccoro_poll_arm`) and `ccoro_poll_watch`,
/// the descriptor itself (upper 32 bits zero). Error and hang-up conditions set both directions.
typedef struct ccoro_poll_event {
  uint64_t data;
  int readable;
  int writable;
} ccoro_poll_event;

/// Registers `fd` once, edge-triggered, for both directions (epoll: EPOLLIN|EPOLLOUT|EPOLLRDHUP|
/// EPOLLET; kqueue: EVFILT_READ and EVFILT_WRITE with EV_CLEAR), reporting `data` with each event.
/// An existing registration of the same open file in `pfd` is replaced. Returns 0 or errno.
/// (Go runtime netpoll_epoll.go / netpoll_kqueue.go, netpollopen.)
int ccoro_poll_register(int pfd, int fd, uint64_t data);
/// Waits up to `timeout_ns` (-1: forever) and writes up to `max` (at most 64) events to `out`,
/// each with the datum its descriptor was registered with (see `ccoro_poll_event`). Returns
/// their number.
int ccoro_poll_wait(int pfd, ccoro_poll_event *out, int max, long long timeout_ns);
/// Sets the calling thread's timer slack (how late the kernel may end its timed waits, to batch
/// wake-ups; 50 µs by default on Linux) to `ns` nanoseconds and returns the previous value, or
/// -1 where there is no such setting (then it does nothing).
long ccoro_set_timer_slack(long ns);
/// The calling thread's stack: lowest address and size (looked up once per thread).
void ccoro_thread_stack_bounds(void **base, size_t *size);
/// Has glibc merge the small blocks it parked in its fast bins (no-op with other C libraries).
/// glibc merges them only when a large block is requested; a workload of small objects alone
/// (a million-coroutine fan-out) otherwise leaves them unmerged and later allocations search
/// fragmented bins. One allocation of 2 KiB triggers the merge; it is freed at once.
void ccoro_heap_consolidate(void);

/// Tells ThreadSanitizer that the calling thread acquired / released the lock guarding `addr`
/// (no-ops without TSan). Synchronization.Mutex is compiled without instrumentation, so TSan
/// cannot see its happens-before edges unless they are annotated.
void ccoro_tsan_acquire(void *addr);
void ccoro_tsan_release(void *addr);

/// Asks the CPU to start loading the cache line at `p`.
static inline void ccoro_prefetch(const void *p) {
  __builtin_prefetch(p);
}

/// Asks the CPU to start loading the frames a suspended context returns through when resumed
/// (first the registers that `ccoro_switch` pops): the `lines` cache lines from its saved stack
/// pointer up.
static inline void ccoro_prefetch_frames(const ccoro_context *ctx, int lines) {
  const char *sp = (const char *)ctx->sp;
  for (int i = 0; i < lines; i++) __builtin_prefetch(sp + 64 * i);
}

/// A hint to the CPU that the caller is spinning (x86 `pause`, arm64 `yield`).
static inline void ccoro_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// MARK: - Futex (the channel lock's slow path)

/// Sleeps while `*addr == expected` (Linux futex, Darwin __ulock). May return spuriously.
void ccoro_futex_wait(uint32_t *addr, uint32_t expected);
/// Wakes one thread sleeping in `ccoro_futex_wait` on `addr`.
void ccoro_futex_wake_one(uint32_t *addr);

// MARK: - Fork (fork.c; do not touch the variables directly)

extern int ccoro_forked_do_not_touch;
extern long ccoro_runtime_pid_do_not_touch;

/// Registers, once per process, a pthread_atfork child handler that marks a forked child (see
/// `ccoro_is_forked_child`) and then calls `hook` on the forking thread of the child. Later calls
/// do nothing. The handler does not run for posix_spawn or vfork.
void ccoro_fork_install(void (*hook)(void));
/// Non-zero in a process forked (fork()) from one whose runtime had installed the handlers,
/// whose threads and descriptors it must not use. One relaxed load.
static inline int ccoro_is_forked_child(void) { return __atomic_load_n(&ccoro_forked_do_not_touch, __ATOMIC_RELAXED); }
/// The pid of the process that installed the handlers (the one that owns the runtime's threads),
/// or 0 before `ccoro_fork_install`.
static inline long ccoro_runtime_pid(void) { return ccoro_runtime_pid_do_not_touch; }

// MARK: - Misc

/// Current thread's kernel id (gettid) or a stable per-thread number.
uint64_t ccoro_thread_id(void);
/// Starts a detached thread running fn(arg); returns 0 or an error number.
int ccoro_thread_start(void (*fn)(void *), void *arg);
/// Names the calling thread (truncated to the platform's limit).
void ccoro_set_thread_name(const char *name);
/// Monotonic clock in nanoseconds.
static inline uint64_t ccoro_now_ns(void);

#ifdef __cplusplus
}
#endif

#include <time.h>
static inline uint64_t ccoro_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
