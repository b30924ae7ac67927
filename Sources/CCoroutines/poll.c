// The I/O readiness poller: epoll + eventfd on Linux, kqueue + a pipe on macOS. One-shot interest
// (ccoro_poll_arm) for arbitrary descriptors, and persistent edge-triggered registrations
// (ccoro_poll_register) for descriptors whose owner knows when they are closed, as Go's netpoll.
#define _GNU_SOURCE
#include "CCoroutines.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>

long ccoro_set_timer_slack(long ns) {
  int previous = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (previous < 0) return -1;
  prctl(PR_SET_TIMERSLACK, (unsigned long)ns, 0, 0, 0);
  return previous;
}

int ccoro_poll_create(int *wake_read, int *wake_write) {
  int pfd = epoll_create1(EPOLL_CLOEXEC);
  if (pfd < 0) return -1;
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) { close(pfd); return -1; }
  struct epoll_event ev = {0};
  ev.events = EPOLLIN;
  ev.data.fd = efd;
  epoll_ctl(pfd, EPOLL_CTL_ADD, efd, &ev);
  *wake_read = efd;
  *wake_write = efd;
  return pfd;
}

void ccoro_poll_wake(int wake_write) {
  uint64_t one = 1;
  ssize_t r = write(wake_write, &one, sizeof one);
  (void)r;
}

void ccoro_poll_drain_wake(int wake_read) {
  uint64_t v;
  while (read(wake_read, &v, sizeof v) > 0) {}
}

int ccoro_poll_arm(int pfd, int fd, int readable, int writable) {
  struct epoll_event ev = {0};
  ev.events = EPOLLONESHOT;
  if (readable) ev.events |= EPOLLIN | EPOLLRDHUP;
  if (writable) ev.events |= EPOLLOUT;
  ev.data.fd = fd;
  if (epoll_ctl(pfd, EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
  if (errno == ENOENT && epoll_ctl(pfd, EPOLL_CTL_ADD, fd, &ev) == 0) return 0;
  return errno;
}

void ccoro_poll_disarm(int pfd, int fd) {
  struct epoll_event ev = {0};
  epoll_ctl(pfd, EPOLL_CTL_DEL, fd, &ev);
}

int ccoro_poll_watch(int pfd, int fd) {
  struct epoll_event ev = {0};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return epoll_ctl(pfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : errno;
}

#ifndef SYS_epoll_pwait2
#if defined(__x86_64__) || defined(__aarch64__)
#define SYS_epoll_pwait2 441
#endif
#endif

// Whether epoll_pwait2 (Linux 5.11) works here: 0 not known yet, 1 yes, -1 no (ENOSYS: an older
// kernel, or a seccomp filter that refuses it).
// 1: epoll_pwait2 works; 0: not tried yet; -1: absent (ENOSYS), or turned off by the
// environment (COROUTINES_EPOLL_PWAIT2=0, read once) to exercise the timerfd fallback.
static int pwait2_state = 0;
static pthread_once_t pwait2_once = PTHREAD_ONCE_INIT;
static void read_pwait2_setting(void) {
  const char *v = getenv("COROUTINES_EPOLL_PWAIT2");
  if (v && strcmp(v, "0") == 0) __atomic_store_n(&pwait2_state, -1, __ATOMIC_RELAXED);
}

// The fallback for a timeout that is not whole milliseconds where epoll_pwait2 is missing
// (Linux before 5.11): a timerfd of the polling thread, added to the epoll being waited on and
// armed to the timeout with nanoseconds; epoll_wait then waits without a timeout of its own, and
// the timer's event is consumed and dropped here (its datum is no descriptor's: PollTable's data
// are an fd, or bit 63 with an fd below 2^31 in the low word). One timerfd per thread, closed
// when the thread ends; it is added again to each epoll the thread waits on (EEXIST is fine; a
// closed epoll forgets it, and its number may be reused by the next).
#define CCORO_TIMER_DATUM 0xFFFFFFFFFFFFFFFEull
static __thread int thread_timer_fd = -1;
static pthread_key_t timer_key;
static pthread_once_t timer_key_once = PTHREAD_ONCE_INIT;
static void close_thread_timer(void *unused) {
  (void)unused;
  if (thread_timer_fd >= 0) { close(thread_timer_fd); thread_timer_fd = -1; }
}
static void make_timer_key(void) { pthread_key_create(&timer_key, close_thread_timer); }

static int wait_with_timerfd(int pfd, struct epoll_event *evs, int max, long long timeout_ns) {
  if (thread_timer_fd < 0) {
    pthread_once(&timer_key_once, make_timer_key);
    thread_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (thread_timer_fd < 0) return -1;
    pthread_setspecific(timer_key, (void *)1);   // a value, so that the destructor runs
  }
  struct epoll_event ev = {0};
  ev.events = EPOLLIN;
  ev.data.u64 = CCORO_TIMER_DATUM;
  if (epoll_ctl(pfd, EPOLL_CTL_ADD, thread_timer_fd, &ev) != 0 && errno != EEXIST) return -1;
  struct itimerspec its = {0};
  its.it_value.tv_sec = (time_t)(timeout_ns / 1000000000LL);
  its.it_value.tv_nsec = (long)(timeout_ns % 1000000000LL);
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;   // 0 would disarm
  if (timerfd_settime(thread_timer_fd, 0, &its, NULL) != 0) return -1;
  int n = epoll_wait(pfd, evs, max, -1);
  struct itimerspec off = {0};
  timerfd_settime(thread_timer_fd, 0, &off, NULL);   // disarmed: no expiry left for a later wait
  if (n < 0) return 0;
  int kept = 0;
  for (int i = 0; i < n; i++) {
    if (evs[i].data.u64 == CCORO_TIMER_DATUM) {
      uint64_t expirations;
      ssize_t r = read(thread_timer_fd, &expirations, sizeof expirations);
      (void)r;
      continue;
    }
    evs[kept++] = evs[i];
  }
  return kept;
}

static int wait_events(int pfd, struct epoll_event *evs, int max, long long timeout_ns) {
  if (max > 64) max = 64;
  pthread_once(&pwait2_once, read_pwait2_setting);
  int sub_millisecond = timeout_ns >= 0 && timeout_ns % 1000000 != 0;
#ifdef SYS_epoll_pwait2
  if (sub_millisecond && __atomic_load_n(&pwait2_state, __ATOMIC_RELAXED) >= 0) {
    struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000LL), .tv_nsec = (long)(timeout_ns % 1000000000LL) };
    long n = syscall(SYS_epoll_pwait2, pfd, evs, max, &ts, NULL, (size_t)0);
    if (n >= 0) {
      __atomic_store_n(&pwait2_state, 1, __ATOMIC_RELAXED);
      return (int)n;
    }
    if (errno != ENOSYS) return 0;   // EINTR: the loop polls again
    __atomic_store_n(&pwait2_state, -1, __ATOMIC_RELAXED);
  }
#endif
  if (sub_millisecond) {
    int n = wait_with_timerfd(pfd, evs, max, timeout_ns);
    if (n >= 0) return n;
    // No timerfd (descriptors exhausted): whole milliseconds below, rounded up.
  }
  int timeout_ms = -1;
  if (timeout_ns >= 0) {
    long long ms = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0);
    timeout_ms = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
  }
  int n = epoll_wait(pfd, evs, max, timeout_ms);
  return n < 0 ? 0 : n;
}

static void decode_events(uint32_t e, int *readable, int *writable) {
  int err = (e & (EPOLLERR | EPOLLHUP)) != 0;
  *readable = err || (e & (EPOLLIN | EPOLLRDHUP)) != 0;
  *writable = err || (e & EPOLLOUT) != 0;
}

int ccoro_poll_register(int pfd, int fd, uint64_t data) {
  struct epoll_event ev = {0};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = data;
  if (epoll_ctl(pfd, EPOLL_CTL_ADD, fd, &ev) == 0) return 0;
  // The same open file is already in this epoll (a one-shot wait on it, or a registration of an
  // earlier owner of the number whose file is still open elsewhere): take it over.
  if (errno == EEXIST && epoll_ctl(pfd, EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
  return errno;
}

int ccoro_poll_wait(int pfd, ccoro_poll_event *out, int max, long long timeout_ns) {
  struct epoll_event evs[64];
  int n = wait_events(pfd, evs, max, timeout_ns);
  for (int i = 0; i < n; i++) {
    out[i].data = evs[i].data.u64;
    decode_events(evs[i].events, &out[i].readable, &out[i].writable);
  }
  return n;
}

#elif defined(__APPLE__)
long ccoro_set_timer_slack(long ns) { (void)ns; return -1; }

#include <sys/event.h>
#include <sys/time.h>

int ccoro_poll_create(int *wake_read, int *wake_write) {
  int kq = kqueue();
  if (kq < 0) return -1;
  int fds[2];
  if (pipe(fds) != 0) { close(kq); return -1; }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  struct kevent kev;
  EV_SET(&kev, fds[0], EVFILT_READ, EV_ADD, 0, 0, NULL);
  kevent(kq, &kev, 1, NULL, 0, NULL);
  *wake_read = fds[0];
  *wake_write = fds[1];
  return kq;
}

void ccoro_poll_wake(int wake_write) {
  char b = 1;
  ssize_t r = write(wake_write, &b, 1);
  (void)r;
}

void ccoro_poll_drain_wake(int wake_read) {
  char buf[64];
  while (read(wake_read, buf, sizeof buf) > 0) {}
}

int ccoro_poll_arm(int pfd, int fd, int readable, int writable) {
  struct kevent kev[2];
  int n = 0;
  if (readable) { EV_SET(&kev[n], fd, EVFILT_READ, EV_ADD | EV_ONESHOT, 0, 0, NULL); n++; }
  if (writable) { EV_SET(&kev[n], fd, EVFILT_WRITE, EV_ADD | EV_ONESHOT, 0, 0, NULL); n++; }
  return kevent(pfd, kev, n, NULL, 0, NULL) == 0 ? 0 : errno;
}

void ccoro_poll_disarm(int pfd, int fd) {
  struct kevent kev[2];
  EV_SET(&kev[0], fd, EVFILT_READ, EV_DELETE, 0, 0, NULL);
  EV_SET(&kev[1], fd, EVFILT_WRITE, EV_DELETE, 0, 0, NULL);
  kevent(pfd, &kev[0], 1, NULL, 0, NULL);
  kevent(pfd, &kev[1], 1, NULL, 0, NULL);
}

int ccoro_poll_watch(int pfd, int fd) {
  struct kevent kev;
  EV_SET(&kev, fd, EVFILT_READ, EV_ADD, 0, 0, NULL);
  return kevent(pfd, &kev, 1, NULL, 0, NULL) == 0 ? 0 : errno;
}

int ccoro_poll_register(int pfd, int fd, uint64_t data) {
  // EV_CLEAR resets the filter's state once the event is retrieved: the next event comes with
  // the next change (new data, freed room), the kqueue equivalent of EPOLLET. Re-adding an
  // existing knote updates it (also its udata). The datum is never 0 (its tag bit is set), which
  // tells it apart from one-shot interest (udata NULL) in ccoro_poll_wait.
  //
  // EV_RECEIPT reports each filter's outcome separately (an EV_ERROR entry whose data is 0 on
  // success), so that a descriptor that supports only one direction (a pipe's read or write end)
  // is still registered for that one; only if both filters fail is the registration refused.
  struct kevent kev[2], out[2];
  EV_SET(&kev[0], fd, EVFILT_READ, EV_ADD | EV_CLEAR | EV_RECEIPT, 0, 0, (void *)(uintptr_t)data);
  EV_SET(&kev[1], fd, EVFILT_WRITE, EV_ADD | EV_CLEAR | EV_RECEIPT, 0, 0, (void *)(uintptr_t)data);
  int n = kevent(pfd, kev, 2, out, 2, NULL);
  if (n < 0) return errno;
  int first_error = 0, registered = 0;
  for (int i = 0; i < n; i++) {
    int err = (out[i].flags & EV_ERROR) ? (int)out[i].data : 0;
    if (err == 0) registered++;
    else if (first_error == 0) first_error = err;
  }
  return registered > 0 ? 0 : (first_error != 0 ? first_error : EINVAL);
}

int ccoro_poll_wait(int pfd, ccoro_poll_event *out, int max, long long timeout_ns) {
  struct kevent evs[64];
  if (max > 64) max = 64;
  struct timespec ts, *tsp = NULL;
  if (timeout_ns >= 0) {
    ts.tv_sec = timeout_ns / 1000000000LL;
    ts.tv_nsec = timeout_ns % 1000000000LL;
    tsp = &ts;
  }
  int n = kevent(pfd, NULL, 0, evs, max, tsp);
  for (int i = 0; i < n; i++) {
    uint64_t d = (uint64_t)(uintptr_t)evs[i].udata;
    int err = (evs[i].flags & (EV_ERROR | EV_EOF)) != 0;
    out[i].data = d != 0 ? d : (uint64_t)(uint32_t)evs[i].ident;
    out[i].readable = evs[i].filter == EVFILT_READ || err;
    out[i].writable = evs[i].filter == EVFILT_WRITE || err;
  }
  return n < 0 ? 0 : n;
}
#endif

// A thread's stack does not move, so its bounds are looked up once per thread: on the main
// thread glibc's pthread_getattr_np parses /proc/self/maps, which takes milliseconds once
// hundreds of thousands of coroutine stacks are mapped — and a scheduler asks at every drive
// (each runBlocking).
static __thread void *cached_stack_base;
static __thread size_t cached_stack_size;

void ccoro_thread_stack_bounds(void **base, size_t *size) {
  *base = NULL;
  *size = 0;
#if defined(__linux__)
  if (cached_stack_size != 0) {
    *base = cached_stack_base;
    *size = cached_stack_size;
    return;
  }
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, base, size);
    pthread_attr_destroy(&attr);
    cached_stack_base = *base;
    cached_stack_size = *size;
  }
#elif defined(__APPLE__)
  void *top = pthread_get_stackaddr_np(pthread_self());
  size_t s = pthread_get_stacksize_np(pthread_self());
  *base = (char *)top - s;
  *size = s;
#endif
}
