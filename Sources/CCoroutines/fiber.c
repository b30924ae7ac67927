// Sanitizer fiber annotations. ThreadSanitizer must be told about a switch from a function it
// does not instrument; AddressSanitizer needs start/finish around every switch.
#include "CCoroutines.h"

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CCORO_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define CCORO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CCORO_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CCORO_ASAN 1
#endif

#if CCORO_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#define NO_SANITIZE __attribute__((disable_sanitizer_instrumentation))
#else
#define NO_SANITIZE
#endif

#if CCORO_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

NO_SANITIZE void ccoro_tsan_acquire(void *addr) {
#if CCORO_TSAN
  __tsan_acquire(addr);
#else
  (void)addr;
#endif
}

NO_SANITIZE void ccoro_tsan_release(void *addr) {
#if CCORO_TSAN
  __tsan_release(addr);
#else
  (void)addr;
#endif
}

#if CCORO_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif

#if CCORO_ASAN
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif

NO_SANITIZE void ccoro_stack_unpoison(const ccoro_stack *stack) {
#if CCORO_ASAN
  __asan_unpoison_memory_region(stack->base, stack->size);
#else
  (void)stack;
#endif
}

#if CCORO_TSAN || CCORO_ASAN
const int ccoro_fibers_active = 1;
#else
const int ccoro_fibers_active = 0;
#endif

NO_SANITIZE void *ccoro_fiber_create(void) {
#if CCORO_TSAN
  return __tsan_create_fiber(0);
#else
  return NULL;
#endif
}

NO_SANITIZE void ccoro_fiber_destroy(void *fiber) {
#if CCORO_TSAN
  if (fiber) __tsan_destroy_fiber(fiber);
#else
  (void)fiber;
#endif
}

NO_SANITIZE void *ccoro_fiber_current(void) {
#if CCORO_TSAN
  return __tsan_get_current_fiber();
#else
  return NULL;
#endif
}

NO_SANITIZE void ccoro_fiber_will_switch(void *fiber, const void *bottom, size_t size, void **fake_stack, int finishing) {
#if CCORO_ASAN
  __sanitizer_start_switch_fiber(finishing ? NULL : fake_stack, bottom, size);
#else
  (void)bottom; (void)size; (void)fake_stack; (void)finishing;
#endif
#if CCORO_TSAN
  if (fiber) __tsan_switch_to_fiber(fiber, 0);
#else
  (void)fiber;
#endif
}

NO_SANITIZE void ccoro_fiber_did_switch(void *fake_stack) {
#if CCORO_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, NULL, NULL);
#else
  (void)fake_stack;
#endif
}

NO_SANITIZE void ccoro_fiber_did_switch_from(void *fake_stack, const void **bottom_old, size_t *size_old) {
#if CCORO_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
#else
  (void)fake_stack;
  *bottom_old = NULL;
  *size_old = 0;
#endif
}
