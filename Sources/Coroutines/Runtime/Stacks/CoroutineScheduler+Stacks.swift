import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A coroutine's stack, from the scheduler's side: taken when the coroutine first runs (from
/// the scheduler's own cache of default-size stacks, else from ``StackAllocator``), checked at
/// every switch away, and released when the coroutine is reaped. Scheduler thread only.
extension CoroutineScheduler {
    /// Gives `c` a stack and lays out its first frame. False if no stack could be mapped.
    func prepareStack(_ c: Coroutine, cachedOnly: Bool = false) -> Bool {
        let r: UnsafeMutablePointer<ccoro_stack_record>
        if c.stackSize == StackAllocator.defaultStackSize, let cached = stackCache.popLast() {
            cachedStacks.store(stackCache.count, ordering: .releasing)
            StackAllocator.shared.prepareForUse(cached)
            r = cached
        } else if !cachedOnly, let fresh = StackAllocator.shared.take(size: c.stackSize) {
            r = fresh
        } else {
            return false
        }
        c.record = r
        if let name = c.name { c.cName = strdup(name) }
        r.pointee.running = ccoro_running(guard_lo: r.pointee.stack.guard_lo,
                                          guard_hi: r.pointee.stack.base,
                                          name: c.cName,
                                          stack_size: r.pointee.stack.size)
        r.pointee.fiber = ccoro_fiber_create()
        ccoro_make(&r.pointee.context, r.pointee.stack.top, coroutineEntry,
                   Unmanaged.passUnretained(c).toOpaque())
        return true
    }

    /// Aborts with the overflow report if a slab stack's canary was smashed.
    func checkStack(of c: Coroutine, _ r: UnsafeMutablePointer<ccoro_stack_record>) {
        if ccoro_stack_canary_ok(&r.pointee.stack) == 0 {
            ccoro_report_overflow(c.cName, r.pointee.stack.size, "stack canary smashed (slab stack)")
        }
    }

    /// Takes the stack of `c`, which finished and left it for good, and keeps it in this
    /// scheduler's cache (default size, while the cache has room) or gives it back to the
    /// allocator. Scheduler thread only.
    @inline(__always)
    func releaseStack(of c: Coroutine) {
        guard let r = c.record else { return }
        ccoro_fiber_destroy(r.pointee.fiber)
        r.pointee.fiber = nil
        c.record = nil
        if Int(r.pointee.stack.class_size) == StackAllocator.defaultStackSize
            && stackCache.count < StackAllocator.schedulerCacheLimit {
            stackCache.append(r)
            cachedStacks.store(stackCache.count, ordering: .releasing)
        } else {
            StackAllocator.shared.give(r)
        }
    }

    /// Gives the cached stacks back to the allocator (a closing scheduler).
    func releaseStackCache() {
        cachedStacks.store(0, ordering: .releasing)
        for r in stackCache { StackAllocator.shared.give(r) }
        stackCache = []
    }
}
