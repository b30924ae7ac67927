// Stack mappings: guarded stacks (guard + stack, two mappings) and slabs (one mapping, many stacks).
#define _GNU_SOURCE
#include <stdlib.h>
#include "CCoroutines.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif
#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif
#ifndef MAP_STACK
#define MAP_STACK 0
#endif

size_t ccoro_page_size(void) {
  // Atomic: every scheduler thread maps stacks (each guarded map reads it), and the first
  // calls race to fill it in (ThreadSanitizer reports a plain static).
  static _Atomic size_t page = 0;
  size_t p = atomic_load_explicit(&page, memory_order_relaxed);
  if (p == 0) {
    p = (size_t)sysconf(_SC_PAGESIZE);
    atomic_store_explicit(&page, p, memory_order_relaxed);
  }
  return p;
}

/// Maps `total` bytes of stack memory (reserved lazily). Returns 0 or errno.
static int map_stack_memory(size_t total, void **out) {
  void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) return errno;
  *out = m;
  return 0;
}

/// Makes the lowest `guard` bytes of the mapping `m` (of `total` bytes) PROT_NONE; on failure
/// unmaps it. Returns 0 or errno.
static int protect_guard(void *m, size_t guard, size_t total) {
  if (mprotect(m, guard, PROT_NONE) == 0) return 0;
  int e = errno;
  munmap(m, total);
  return e;
}

// Stack colouring. The hot lines of a suspended coroutine sit just below its stack's top, and
// stack tops a multiple of the L2 way size apart (128 KiB on current x86_64 and arm64 cores)
// land in the same cache sets: 2,000 coroutines would then share a handful of sets and miss L2
// on every switch (the concurrent sieve ran 1.5x slower so). Each new guarded stack therefore
// gets the next of CCORO_COLOR_SPAN / page "colours": its top is placed at that page offset
// modulo CCORO_COLOR_SPAN, and the pages this skips widen its guard instead (virtual memory
// only: nothing above the top or inside the guard is ever touched).
static _Atomic size_t next_color = 0;

int ccoro_stack_map_guarded(size_t size, ccoro_stack *out) {
  size_t page = ccoro_page_size();
  size_t colors = CCORO_COLOR_SPAN / page;
  size_t total = CCORO_GUARD_SIZE + size + CCORO_COLOR_SPAN - page;
  void *m;
  int e = map_stack_memory(total, &m);
  if (e) return e;
  // Consecutive stacks take colours 7 apart: neighbours in a pipeline also differ in L1 sets.
  size_t color = atomic_fetch_add_explicit(&next_color, 7, memory_order_relaxed) % colors * page;
  uintptr_t lowest_top = (uintptr_t)m + CCORO_GUARD_SIZE + size;
  uintptr_t top = lowest_top + (color + CCORO_COLOR_SPAN - lowest_top % CCORO_COLOR_SPAN) % CCORO_COLOR_SPAN;
  char *base = (char *)(top - size);
  e = protect_guard(m, (size_t)(base - (char *)m), total);
  if (e) return e;
  out->mapping = m;
  out->mapping_size = total;
  out->guard_lo = m;
  out->base = base;
  out->top = (void *)top;
  out->size = size;
  out->canary = NULL;
  out->class_size = size;
  out->is_slab = 0;
  return 0;
}

void ccoro_stack_unmap_guarded(ccoro_stack *stack) {
  if (stack->mapping) munmap(stack->mapping, stack->mapping_size);
  stack->mapping = NULL;
}

int ccoro_stack_map_slab(size_t size, size_t count, ccoro_stack *out) {
  // Slots one page more than `size` apart, so that consecutive slots take consecutive colours
  // (see above) instead of all sharing one.
  size_t stride = size + ccoro_page_size();
  size_t total = stride * count + CCORO_GUARD_SIZE;
  void *m;
  int e = map_stack_memory(total, &m);
  if (!e) e = protect_guard(m, CCORO_GUARD_SIZE, total);
  if (e) return e;
  char *first = (char *)m + CCORO_GUARD_SIZE;
  for (size_t i = 0; i < count; i++) {
    char *lo = first + i * stride;
    char *hi = lo + stride;
    ccoro_stack *s = &out[i];
    s->mapping = m;
    s->mapping_size = total;
    s->base = lo;
    // The top 64 bytes of every slot hold the canary of the slot above it.
    s->top = hi - 64;
    s->size = stride - 64;
    s->class_size = size;
    s->is_slab = 1;
    if (i == 0) {
      s->guard_lo = m;       // the lowest slot overflows into the slab's guard
      s->canary = NULL;
    } else {
      s->guard_lo = lo;      // no guard: overflow is caught by the canary
      s->canary = (uint64_t *)(lo - 8);
    }
  }
  return 0;
}

long ccoro_current_map_count(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  long lines = 0;
  int c;
  while ((c = fgetc(f)) != EOF) if (c == '\n') lines++;
  fclose(f);
  return lines;
}

long ccoro_max_map_count(void) {
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  if (!f) return -1;
  long v = -1;
  if (fscanf(f, "%ld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

void ccoro_stack_release_memory(const ccoro_stack *stack) {
  size_t page = ccoro_page_size();
  uintptr_t lo = (uintptr_t)stack->base;
  uintptr_t hi = (uintptr_t)stack->top;
  if (stack->is_slab) hi &= ~(uintptr_t)(page - 1);   // keep the page holding the canary above
  else hi = (hi + page - 1) & ~(uintptr_t)(page - 1);
  lo = (lo + page - 1) & ~(uintptr_t)(page - 1);
  if (hi <= lo) return;
#if defined(MADV_DONTNEED) && defined(__linux__)
  madvise((void *)lo, hi - lo, MADV_DONTNEED);
#elif defined(MADV_FREE)
  madvise((void *)lo, hi - lo, MADV_FREE);
#endif
}
