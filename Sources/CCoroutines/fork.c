// The fork handlers (see ForkGuard.swift for what the runtime does with them).
//
// Invariants
//   1. The handlers are registered at most once per process image (pthread_once), and only by
//      ccoro_fork_install, which the runtime calls before its first descriptor or thread exists.
//   2. ccoro_forked_do_not_touch is 0 in the process that registered the handlers and becomes 1,
//      for good, in the child of every fork() made after that; a child inherits the registration,
//      so a child's own children are marked too. The child handler does only async-signal-safe
//      work (two stores, getpid) before it calls the hook.
//   3. posix_spawn and vfork do not run pthread_atfork handlers (glibc, Darwin): a spawned child
//      is never marked (it execs at once, and none of this process's code runs in it).
#include "CCoroutines.h"

#include <pthread.h>
#include <unistd.h>

int ccoro_forked_do_not_touch = 0;
long ccoro_runtime_pid_do_not_touch = 0;

static void (*child_hook)(void);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void in_child(void) {
  __atomic_store_n(&ccoro_forked_do_not_touch, 1, __ATOMIC_SEQ_CST);
  if (child_hook) child_hook();
}

static void install(void) {
  ccoro_runtime_pid_do_not_touch = (long)getpid();
  pthread_atfork(NULL, NULL, in_child);
}

void ccoro_fork_install(void (*hook)(void)) {
  // Written before pthread_once publishes the registration; never changed after.
  if (__atomic_load_n(&child_hook, __ATOMIC_ACQUIRE) == NULL) __atomic_store_n(&child_hook, hook, __ATOMIC_RELEASE);
  pthread_once(&once, install);
}
