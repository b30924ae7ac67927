#include "CCoroutines.h"

#include <stdlib.h>

void ccoro_heap_consolidate(void) {
#if defined(__GLIBC__)
    // A request above glibc's small-bin range (1 KiB) makes `_int_malloc` call
    // `malloc_consolidate` first when fast-bin blocks exist (glibc malloc.c). The volatile
    // pointer keeps the compiler from eliding the pair.
    void *volatile block = malloc(2048);
    free(block);
#endif
}
