// Stack mappings: guarded stacks (guard + stack, two mappings) and slabs (one mapping, many stacks).
#define _GNU_SOURCE
#include "CCoroutines.h"

#include <errno.h>
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
  static size_t page = 0;
  if (page == 0) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

/// Maps `total` bytes whose lowest CCORO_GUARD_SIZE bytes are PROT_NONE. Returns 0 or errno.
static int map_with_guard(size_t total, void **out) {
  void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) return errno;
  if (mprotect(m, CCORO_GUARD_SIZE, PROT_NONE) != 0) {
    int e = errno;
    munmap(m, total);
    return e;
  }
  *out = m;
  return 0;
}

int ccoro_stack_map_guarded(size_t size, ccoro_stack *out) {
  size_t total = size + CCORO_GUARD_SIZE;
  void *m;
  int e = map_with_guard(total, &m);
  if (e) return e;
  out->mapping = m;
  out->mapping_size = total;
  out->guard_lo = m;
  out->base = (char *)m + CCORO_GUARD_SIZE;
  out->top = (char *)m + total;
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
  size_t total = size * count + CCORO_GUARD_SIZE;
  void *m;
  int e = map_with_guard(total, &m);
  if (e) return e;
  char *first = (char *)m + CCORO_GUARD_SIZE;
  for (size_t i = 0; i < count; i++) {
    char *lo = first + i * size;
    char *hi = lo + size;
    ccoro_stack *s = &out[i];
    s->mapping = m;
    s->mapping_size = total;
    s->base = lo;
    // The top 64 bytes of every slot hold the canary of the slot above it.
    s->top = hi - 64;
    s->size = size - 64;
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
