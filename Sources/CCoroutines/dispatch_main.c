// Access to libdispatch's main-queue hooks for CoreFoundation, so a scheduler driving the main
// thread can also run blocks submitted to DispatchQueue.main.
#include "CCoroutines.h"

#if defined(__linux__)
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);

int ccoro_dispatch_main_queue_fd(void) { return _dispatch_get_main_queue_handle_4CF(); }
void ccoro_dispatch_main_queue_drain(void) { _dispatch_main_queue_callback_4CF(NULL); }
#else
int ccoro_dispatch_main_queue_fd(void) { return -1; }
void ccoro_dispatch_main_queue_drain(void) {}
#endif
