import Synchronization
import CCoroutines

/// The context-switch paths of a scheduler: from the loop to a coroutine, from a coroutine
/// directly to the next ready one, and back to the loop, each through ``switchContext(from:to:target:fakeStack:returning:currentFiber:previousStackBottom:previousStackSize:)``.
/// All of this runs on the scheduler's own thread.
extension CoroutineScheduler {
    /// Switches from the context in `from` to coroutine `c` (which owns a stack).
    @inline(__always)
    func transfer(from: UnsafeMutablePointer<ccoro_stack_record>, to c: Coroutine) {
        assert(isOnOwnThread && c.scheduler === self,
               "internal inconsistency: coroutine \(c) resumed on a thread other than its scheduler's")
        c.status = .running
        let r = c.record.unsafelyUnwrapped
        ccoro_tls_set_coroutine(Unmanaged.passUnretained(c).toOpaque(), &r.pointee.running)
        noteSwitch(to: c)
        // `ret` only where both sides suspended at the same call site: a started coroutine
        // switching directly to another (both in switchAway). Into a fresh stack's trampoline, or
        // from the loop, the return-stack prediction would miss: jump instead.
        let returning = c.hasRun && from != loopRecord
        if !returning { c.hasRun = true }
        switchContext(from: &from.pointee.context, to: &r.pointee.context,
                      target: (r.pointee.fiber, UnsafeRawPointer(r.pointee.stack.base), r.pointee.stack.size),
                      fakeStack: &from.pointee.fake_stack, returning: returning)
    }

    /// Gives up the thread on behalf of the running coroutine `c`: switches directly to the next
    /// ready coroutine if there is one (and the direct budget allows), else to the loop. Returns
    /// when `c` is resumed.
    func switchAway(from c: Coroutine) {
        let r = c.record.unsafelyUnwrapped
        checkStack(of: c, r)
        // An actor with a requester waiting directly for it: back to that requester, or resume it
        // or give it up first (`Mailbox` invariant 8).
        if _slowPath(c.hasDirectRequester), switchBackToDirectRequester(from: c, r) { return }
        if directBudget > 0, let next = takeDirectSuccessor() {
            directBudget -= 1
            prefetchAhead()
            // Borrowed: the registry keeps `next` alive while it runs (CoroutineQueue).
            next._withUnsafeGuaranteedRef { transfer(from: r, to: $0) }
            return
        }
        ccoro_tls_set_coroutine(nil, nil)
        // To the loop's call site (a jump: the loop switched from elsewhere). `loop`, not
        // `loopRecord`, in the sanitizers' description: it would capture `self`.
        let loop = loopRecord
        switchContext(from: &r.pointee.context, to: &loop.pointee.context,
                      target: (loop.pointee.fiber, UnsafeRawPointer(loop.pointee.stack.base), loop.pointee.stack.size),
                      fakeStack: &r.pointee.fake_stack)
    }

    /// `switchAway` of an actor's coroutine `c` (context in `r`) while a requester waits
    /// directly for it: switches straight back to that requester if the actor parks in its
    /// mailbox with the request answered and the direct budget allows, returning true when `c` is
    /// resumed; else resumes or gives up the requester (`Mailbox` invariant 8) and returns false.
    /// Out of line, so that every other suspension's `switchAway` keeps its small frame (inlined,
    /// `yield` took 1 ns more; so did a second call site in `switchAway`, which took one more
    /// callee-saved register). The switch is its call of ``transferDirect(from:_:to:)``.
    @inline(never)
    private func switchBackToDirectRequester(from c: Coroutine, _ r: UnsafeMutablePointer<ccoro_stack_record>) -> Bool {
        guard c.switchesBackToRequester, directBudget > 0 else {
            leaveDirectRequester(of: c)
            return false
        }
        directBudget -= 1
        let requester = c.directRequester.unsafelyUnwrapped
        c.directRequester = nil
        c.switchesBackToRequester = false
        requester._withUnsafeGuaranteedRef { next in
            next.wakeReason = .completed
            transferDirect(from: c, r, to: next)
        }
        return true
    }

    /// Suspends the running coroutine `c`, a direct requester (`Mailbox` invariant 7): unarmed,
    /// resumed only by this thread, and switches straight to `next`, the actor whose mailbox wait
    /// `c` claimed. Returns when `c` is resumed. On this scheduler's thread. Inlined into the
    /// requester's code (see ``transferDirect(from:_:to:)``).
    @inlinable @inline(__always)
    func switchDirect(from c: Coroutine, to next: Coroutine) {
        c.waitKindValue.store(WaitKind.actorRequest.rawValue, ordering: .relaxed)
        c.status = .suspended
        // `c` is itself an actor with a requester waiting directly: it leaves without parking.
        if _slowPath(c.hasDirectRequester) { leaveDirectRequester(of: c) }
        next.wakeReason = .completed
        transferDirect(from: c, c.record.unsafelyUnwrapped, to: next)
    }

    /// `c`, whose `directRequester` is set, suspends or switches to another coroutine without
    /// switching back to it: resumes or gives up that requester (`Mailbox` invariant 8).
    @usableFromInline @inline(never)
    func leaveDirectRequester(of c: Coroutine) {
        c.unstartedObserver.unsafelyUnwrapped.coroutineLeavesDirectRequester(c)
    }

    /// Arms the mailbox wait of the actor parked unarmed on this thread (``actorOwnedByThread``,
    /// `Mailbox` invariant 12), as the actor would have, and wakes it at once if a message was
    /// queued or an interrupt came meanwhile. Called by the loop as soon as a coroutine gives it
    /// the thread back, so that the loop never sees an unarmed actor: stopping, parking and
    /// timers find it armed, as any other waiter.
    @inline(never)
    func armActorOwnedByThread() {
        let actor = actorOwnedByThread.unsafelyUnwrapped
        actorOwnedByThread = nil
        // The mailbox is alive: the actor's body, suspended in it, holds it.
        actor._withUnsafeGuaranteedRef { $0.unstartedObserver.unsafelyUnwrapped.armWaitOwnedByThread($0) }
    }

    /// ``transfer(from:to:)`` for both sides of a direct request: called by the requester's code
    /// (``switchDirect(from:to:)``, inlined there) and by the actor's ``switchAway(from:)``
    /// (through `switchBackToDirectRequester`), so
    /// that each side, resumed, returns through one frame the return predictor does not expect
    /// (this one's) where a longer chain of calls missed at every return. The switch's own return
    /// is predicted: both sides suspend at this one call site. Checks the stack of `c` (its
    /// context in `r`) before it leaves, and clears its wait kind when it is resumed: a store
    /// after the switch, so that the switch is a call from here, not a tail call from the
    /// callers.
    @usableFromInline @inline(never)
    func transferDirect(from c: Coroutine, _ r: UnsafeMutablePointer<ccoro_stack_record>, to next: Coroutine) {
        checkStack(of: c, r)
        transfer(from: r, to: next)
        c.waitKindValue.store(WaitKind.none.rawValue, ordering: .relaxed)
    }

    /// Takes a turn for a direct request (`Mailbox` invariant 9): one of the ``handoffLimit``
    /// hand-offs in a row (as ``makeReadyNext(_:)`` counts them) and one of the direct budget
    /// (the switches without a turn of the loop). False, taking nothing, when either is spent,
    /// and the streak starts again. On this scheduler's thread.
    @inlinable @inline(__always)
    func takeDirectTurn() -> Bool {
        guard directBudget > 0 else { return false }
        let switches = switchCount.load(ordering: .relaxed)
        if switches &- lastHandoffSwitch > 2 { handoffStreak = 0 }   // others ran in between
        lastHandoffSwitch = switches
        guard handoffStreak < Self.handoffLimit else {
            handoffStreak = 0
            return false
        }
        handoffStreak += 1
        directBudget -= 1
        return true
    }

    /// The head of the run queue, taken off, if it is a coroutine that can run at once (a
    /// pending launch at the head gets its coroutine now, which stays queued if it cannot).
    ///
    /// A pool scheduler also looks at its unstarted launches, out of line: a scheduler without a
    /// pool pays one test for it. (Inlined, the pool's path made this function save five
    /// registers and check a stack canary at every direct switch: `yield` took 1.2 ns more.)
    @inline(__always)
    private func takeDirectSuccessor() -> Unmanaged<Coroutine>? {
        if _slowPath(launchQueue != nil) { return takePoolDirectSuccessor() }
        return popQueuedRunnable(if: { canRunDirectly($0) })
    }

    /// ``takeDirectSuccessor()`` on a pool scheduler.
    @inline(never)
    private func takePoolDirectSuccessor() -> Unmanaged<Coroutine>? {
        popPoolRunnable(if: { canRunDirectly($0) })
    }

    /// Whether `next` can run right now, on the suspending coroutine's stack's behalf.
    @inline(__always)
    private func canRunDirectly(_ next: Coroutine) -> Bool {
        if next.record != nil { return true }
        // Only a stack from this scheduler's cache: mapping a fresh one runs deep code
        // (first-use metadata, slab set-up) that must not run on the suspending
        // coroutine's possibly small stack. The loop's own stack handles the rest.
        return !next.cancelledFlag.load(ordering: .relaxed) && prepareStack(next, cachedOnly: true)
    }

    /// Records the loop's own context: the thread's stack and its sanitizer fiber, which
    /// coroutines switch back to.
    func prepareLoopRecord() {
        loopRecord.pointee.fiber = ccoro_fiber_current()
        var base: UnsafeMutableRawPointer?
        var size = 0
        ccoro_thread_stack_bounds(&base, &size)
        loopRecord.pointee.stack.base = base
        loopRecord.pointee.stack.size = size
    }
}
