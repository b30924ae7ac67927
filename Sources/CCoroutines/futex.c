// Futex wait/wake for the channel lock's contended path (see FutexLock.swift).
#include "CCoroutines.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void ccoro_futex_wait(uint32_t *addr, uint32_t expected) {
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void ccoro_futex_wake_one(uint32_t *addr) {
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#elif defined(__APPLE__)
// The same primitive libc++ uses for std::atomic::wait on Darwin.
extern int __ulock_wait(uint32_t operation, void *addr, uint64_t value, uint32_t timeout);
extern int __ulock_wake(uint32_t operation, void *addr, uint64_t wake_value);
#define CCORO_UL_COMPARE_AND_WAIT 1

void ccoro_futex_wait(uint32_t *addr, uint32_t expected) {
  __ulock_wait(CCORO_UL_COMPARE_AND_WAIT, addr, expected, 0);
}

void ccoro_futex_wake_one(uint32_t *addr) {
  __ulock_wake(CCORO_UL_COMPARE_AND_WAIT, addr, 0);
}

#else
#include <sched.h>
void ccoro_futex_wait(uint32_t *addr, uint32_t expected) { (void)addr; (void)expected; sched_yield(); }
void ccoro_futex_wake_one(uint32_t *addr) { (void)addr; }
#endif
