// The stack-overflow reporter: an alternate signal stack per thread and a SIGSEGV/SIGBUS handler
// that recognises a hit in the running coroutine's guard region. Other faults go to the previous
// handler unchanged.
#define _GNU_SOURCE
#include "CCoroutines.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

CCORO_TLS void *ccoro_tls_coroutine_do_not_touch = NULL;
CCORO_TLS void *ccoro_tls_scheduler_do_not_touch = NULL;
CCORO_TLS const ccoro_running *ccoro_tls_running_do_not_touch = NULL;
static _Thread_local int ccoro_tls_altstack_ready = 0;

static struct sigaction previous_segv;
static struct sigaction previous_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void write_str(const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void write_size(size_t v) {
  char buf[32];
  int i = 31;
  buf[i] = 0;
  do {
    buf[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v && i > 0);
  write_str(&buf[i]);
}

void ccoro_report_overflow(const char *name, size_t stack_size, const char *why) {
  write_str("coroutine stack overflow in '");
  write_str(name ? name : "unnamed coroutine");
  write_str("' (stack size ");
  write_size(stack_size);
  write_str(" bytes)");
  if (why) {
    write_str(": ");
    write_str(why);
  }
  write_str("\n");
  signal(SIGABRT, SIG_DFL);
  abort();
}

void ccoro_stack_bound_exceeded(const ccoro_running *r) {
  ccoro_report_overflow(r->name, r->stack_size, "the stack pointer is below the stack's lower bound");
}

static void pass_on(int sig, siginfo_t *info, void *uctx, const struct sigaction *prev) {
  if (prev->sa_flags & SA_SIGINFO) {
    if (prev->sa_sigaction) {
      prev->sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
    return;
  }
  // Default action: restore it and return; the faulting instruction runs again and the fault
  // then takes the default path (core dump / termination).
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
}

static void fault_handler(int sig, siginfo_t *info, void *uctx) {
  const ccoro_running *r = ccoro_tls_running_do_not_touch;
  if (r && info) {
    char *addr = (char *)info->si_addr;
    if (addr >= (char *)r->guard_lo && addr < (char *)r->guard_hi) {
      ccoro_report_overflow(r->name, r->stack_size, NULL);
    }
  }
  pass_on(sig, info, uctx, sig == SIGSEGV ? &previous_segv : &previous_bus);
}

static void install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &previous_segv);
  sigaction(SIGBUS, &sa, &previous_bus);
}

void ccoro_signal_prepare_thread(void) {
  pthread_once(&install_once, install_handlers);
  if (ccoro_tls_altstack_ready) return;
  ccoro_tls_altstack_ready = 1;
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE) && current.ss_size >= 32768) {
    return;  // the thread already has a usable one (the Swift runtime's backtracer may install one)
  }
  size_t size = 64 * 1024;
  void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return;
  stack_t ss;
  ss.ss_sp = mem;
  ss.ss_size = size;
  ss.ss_flags = 0;
  sigaltstack(&ss, NULL);
  // The memory stays mapped for the thread's life; a dying thread leaks 64 KiB of address space
  // that the kernel reclaims at exit of the process (scheduler threads live long).
}

uint64_t ccoro_thread_id(void) {
#if defined(__linux__)
  return (uint64_t)syscall(SYS_gettid);
#else
  uint64_t tid = 0;
  pthread_threadid_np(NULL, &tid);
  return tid;
#endif
}

void ccoro_set_thread_name(const char *name) {
#if defined(__linux__)
  char buf[16];
  strncpy(buf, name, 15);
  buf[15] = 0;
  pthread_setname_np(pthread_self(), buf);
#elif defined(__APPLE__)
  pthread_setname_np(name);
#endif
}

typedef struct thread_start { void (*fn)(void *); void *arg; } thread_start;

static void *thread_main(void *p) {
  thread_start ts = *(thread_start *)p;
  free(p);
  ts.fn(ts.arg);
  return NULL;
}

int ccoro_thread_start(void (*fn)(void *), void *arg) {
  thread_start *ts = malloc(sizeof *ts);
  if (!ts) return ENOMEM;
  ts->fn = fn;
  ts->arg = arg;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &attr, thread_main, ts);
  pthread_attr_destroy(&attr);
  if (rc != 0) free(ts);
  return rc;
}
