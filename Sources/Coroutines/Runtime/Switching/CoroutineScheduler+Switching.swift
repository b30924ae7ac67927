import Synchronization
import CCoroutines

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The context-switch paths of a scheduler. All of this runs on the scheduler's own thread.
extension CoroutineScheduler {
    /// Switches from the context in `from` to coroutine `c` (which owns a stack).
    @inline(__always)
    func transfer(from: UnsafeMutablePointer<ccoro_stack_record>, to c: Coroutine) {
        assert(isOnOwnThread && c.scheduler === self,
               "internal inconsistency: coroutine \(c) resumed on a thread other than its scheduler's")
        c.status = .running
        let r = c.record.unsafelyUnwrapped
        ccoro_tls_set_coroutine(Unmanaged.passUnretained(c).toOpaque(), &r.pointee.running)
        // `ret` only where both sides suspended at the same call site: a started coroutine
        // switching directly to another (both in switchAway). Into a fresh stack's trampoline, or
        // from the loop, the return-stack prediction would miss: jump instead.
        let returning = c.hasRun && from != loopRecord
        if !returning { c.hasRun = true }
        switchContext(from: &from.pointee.context, to: &r.pointee.context,
                      fiber: r.pointee.fiber, stackBottom: r.pointee.stack.base, stackSize: r.pointee.stack.size,
                      fakeStack: &from.pointee.fake_stack, returning: returning)
    }

    /// Gives up the thread on behalf of the running coroutine `c`: switches directly to the next
    /// ready coroutine if there is one (and the direct budget allows), else to the loop. Returns
    /// when `c` is resumed.
    func switchAway(from c: Coroutine) {
        let r = c.record.unsafelyUnwrapped
        checkStack(of: c, r)
        if directBudget > 0, let next = takeDirectSuccessor() {
            directBudget -= 1
            prefetchAhead()
            // Borrowed: the registry keeps `next` alive while it runs (CoroutineQueue).
            next._withUnsafeGuaranteedRef { transfer(from: r, to: $0) }
            return
        }
        ccoro_tls_set_coroutine(nil, nil)
        // To the loop's call site (a jump: the loop switched from elsewhere).
        switchContext(from: &r.pointee.context, to: &loopRecord.pointee.context,
                      fiber: loopRecord.pointee.fiber, stackBottom: loopRecord.pointee.stack.base,
                      stackSize: loopRecord.pointee.stack.size, fakeStack: &r.pointee.fake_stack)
    }

    /// The head of the run queue, taken off, if it is a coroutine that can run at once (a
    /// pending launch at the head gets its coroutine now, which stays queued if it cannot).
    private func takeDirectSuccessor() -> Unmanaged<Coroutine>? {
        popRunnable(if: { next in
            if next.record != nil { return true }
            // Only a stack from this scheduler's cache: mapping a fresh one runs deep code
            // (first-use metadata, slab set-up) that must not run on the suspending
            // coroutine's possibly small stack. The loop's own stack handles the rest.
            return !next.cancelledFlag.load(ordering: .relaxed) && prepareStack(next, cachedOnly: true)
        })
    }

    /// Aborts with the overflow report if a slab stack's canary was smashed.
    func checkStack(of c: Coroutine, _ r: UnsafeMutablePointer<ccoro_stack_record>) {
        if ccoro_stack_canary_ok(&r.pointee.stack) == 0 {
            ccoro_report_overflow(c.cName, r.pointee.stack.size, "stack canary smashed (slab stack)")
        }
    }

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
}

