#include "CCoroutines.h"

// The Swift runtime's plain (non-atomic) retain (libswiftCore, swift/Runtime/HeapObject.h).
void *swift_nonatomic_retain(void *object);

void ccoro_retain_unshared(void *object) {
    swift_nonatomic_retain(object);
}
