import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The life of a coroutine, in the order it happens. All of it runs on the scheduler's thread,
// except a launch from another thread (which posts the coroutine to it).
//
// 1. Launch. `Coroutine.launch` (Coroutine.swift) creates the object and `start` links it to its
//    parent, then `admit` registers it (the registry keeps it alive until it is reaped) and
//    queues it on the run queue, or posts it to the scheduler's thread. `Coroutine.async` from a
//    coroutine onto its own scheduler queues a pending launch instead (`queueLaunch`): its
//    coroutine is created when the launch reaches the head of the run queue (`popRunnable`).
// 2. Run. The loop takes it off the run queue and calls `resumeFromLoop`. The first time, the
//    coroutine gets a stack (`prepareStack`, Stacks/), whose first frame calls `coroutineEntry`;
//    `transfer` (Switching/) switches to it, and `runCoroutine` runs the body. The body may
//    suspend and be resumed any number of times (Suspension/, Switching/).
// 3. Finish. The body returned or threw: `finish(error:)` records how, wakes the joiners and
//    unlinks the coroutine from its parent; it hands itself to the loop (`finishedCoroutine`)
//    and switches out of its stack for good. A coroutine that never runs its body (cancelled
//    before it started, stopped scheduler, no stack) ends in `finishUnstarted` instead.
// 4. Reap. Back on the loop's stack, `reap` gives the stack back and unlinks the coroutine from
//    the registry, whose reference — usually the last — the loop then releases.

// MARK: 1. Launch

extension CoroutineScheduler {
    /// Registers a new coroutine and queues its first run (or finishes it if stopped).
    /// - Parameter entry: The coroutine, with the reference (+1) that the registry keeps until
    ///   `unregister` (or the loop, after `reap`) gives it back.
    func admit(_ entry: Unmanaged<Coroutine>) {
        entry._withUnsafeGuaranteedRef { admit($0, entry) }
    }

    private func admit(_ c: Coroutine, _ entry: Unmanaged<Coroutine>) {
        register(entry)
        c.status = .ready
        if lifecycle.load().isStopRequested {
            if kind == .main {
                // main is being stopped: the coroutine starts cancelled (never runs its body).
                c.cancelledFlag.store(true, ordering: .sequentiallyConsistent)
            } else {
                c.finishUnstarted(CoroutineError.schedulerStopped)
                // The loop may have seen `c` registered and parked, waiting for the live count
                // to reach zero: it must look again.
                wakeLoop()
                return
            }
        }
        if isOnOwnThread {
            runQueue.append(Unmanaged.passUnretained(c))
        } else if !post(.coroutine(c)) {
            c.finishUnstarted(CoroutineError.schedulerStopped)
        }
    }

    /// Queues a `Coroutine.async` launched by `parent`, a coroutine running on this scheduler,
    /// without creating its coroutine yet (``PendingLaunch``). On this scheduler's thread only.
    /// - Parameters:
    ///   - body: The coroutine's body; it keeps `observer` alive.
    ///   - observer: Told if the coroutine never runs its body (the promise).
    /// - Returns: false if a stop was requested, or in a forked child: the caller then launches
    ///   the usual way (which finishes the coroutine as the stop, or the fork, requires).
    /// - Complexity: amortised O(1).
    @usableFromInline
    func queueLaunch(body: consuming @escaping () throws -> Void, observer: any UnstartedObserver,
                     parent: Unmanaged<Coroutine>) -> Bool {
        if lifecycle.loadRelaxed().isStopRequested || ForkGuard.isForkedChild { return false }
        pendingLaunches.append(PendingLaunch(observer: observer, parent: parent.retain(), cancelAllCount: cancelAllCount),
                               body: body)
        runQueue.append(Self.launchMarker)
        pendingLaunchCount.store(pendingLaunches.count, ordering: .relaxed)
        return true
    }
}

// MARK: 2. Run

extension CoroutineScheduler {
    /// Runs `u`, just taken off the run queue, until it suspends or finishes: switches to it
    /// from the loop. The first time, gives it a stack (or finishes it unstarted, if it was
    /// cancelled meanwhile or no stack can be had); after it finished, reaps it.
    func resumeFromLoop(_ u: Unmanaged<Coroutine>) {
        // Borrowed from the registry (CoroutineQueue); `finishUnstarted` holds a reference of its
        // own while it unregisters the coroutine.
        let unstartedError: (any Error)? = u._withUnsafeGuaranteedRef { c in
            guard c.record == nil else { return nil }
            if c.cancelledFlag.load(ordering: .sequentiallyConsistent) { return CancellationError() }
            return prepareStack(c) ? nil : CoroutineError.stackUnavailable
        }
        if let unstartedError {
            u._withUnsafeGuaranteedRef { $0.finishUnstarted(unstartedError) }
            return
        }
        directBudget = 64
        u._withUnsafeGuaranteedRef { transfer(from: loopRecord, to: $0) }
        noteBackOnLoop()
        // Before anything else on the loop: no actor stays unarmed while the loop runs.
        if _slowPath(actorOwnedByThread != nil) { armActorOwnedByThread() }
        if let f = finishedCoroutine {
            // A coroutine that called fork() finished in the child (ForkGuard).
            if ForkGuard.isForkedChild { ForkGuard.forkedChildReturnedToLoop(name) }
            finishedCoroutine = nil
            // Borrowed under the registry's reference, which is given back only after the
            // borrow (it is usually the last one).
            if f._withUnsafeGuaranteedRef({ reap($0) }) { f.release() }
            reapedSinceHeapTidy &+= 1
        }
    }
}

/// The C entry of every coroutine stack (called by the assembly trampoline). It must never
/// return; its frame holds no Swift reference when it switches out for the last time.
let coroutineEntry: @convention(c) (UnsafeMutableRawPointer?) -> Void = { arg in
    let exit = runCoroutine(arg.unsafelyUnwrapped)
    switchContext(from: exit.from, to: UnsafeMutableRawPointer(exit.loop).assumingMemoryBound(to: ccoro_context.self),
                  target: (exit.loop.pointee.fiber, UnsafeRawPointer(exit.loop.pointee.stack.base),
                           exit.loop.pointee.stack.size),
                  fakeStack: nil)
    fatalError("internal inconsistency: a finished coroutine was resumed")
}

/// Runs the body of the coroutine at `arg`, records how it ended and returns the contexts for
/// the final switch. Non-throwing: it catches everything.
@inline(never)
private func runCoroutine(_ arg: UnsafeMutableRawPointer)
    -> (from: UnsafeMutablePointer<ccoro_context>, loop: UnsafeMutablePointer<ccoro_stack_record>) {
    // No reference is taken here: the scheduler's registry holds one until the loop reaps this
    // coroutine, after the final switch.
    Unmanaged<Coroutine>.fromOpaque(arg)._withUnsafeGuaranteedRef { c in
        enterFreshStack()
        var thrown: (any Error)?
        if let body = c.body.take() {
            do { try body() } catch { thrown = error }
        }
        c.placement._withUnsafeGuaranteedRef { scheduler in
            if let r = c.record { scheduler.checkStack(of: c, r) }
        }
        c.finish(error: thrown)
        return c.placement._withUnsafeGuaranteedRef { scheduler in
            scheduler.finishedCoroutine = Unmanaged.passUnretained(c)
            ccoro_tls_set_coroutine(nil, nil)
            let from = UnsafeMutableRawPointer(c.record.unsafelyUnwrapped).assumingMemoryBound(to: ccoro_context.self)
            return (from, scheduler.loopRecord)
        }
    }
}

// MARK: 3. Finish

extension Coroutine {
    /// Records the end of the body, wakes joiners, unlinks from the parent and reports an
    /// unobserved error. Runs on the coroutine's stack or, for unstarted coroutines, anywhere.
    func finish(error: (any Error)?, bodyRan: Bool = true) {
        status = .finished
        // Most coroutines end with neither joiners nor cancel timers: the lists are then left
        // untouched (moving an empty array still costs reference counting).
        var timers: [TimerHandle]?
        var joiners: JoinerQueue.Storage?
        withShared { s in
            s.finished = true
            if let error { s.error = error }
            if !s.cancelTimers.isEmpty { timers = s.cancelTimers; s.cancelTimers = [] }
            joiners = s.joiners.takeAll()
        }
        if let timers { for t in timers { t.cancel() } }
        if let joiners {
            joiners.coroutines.forEach { $0.resume() }   // a tombstone's claim fails: skipped
            for continuation in joiners.tasks.values { continuation.resume() }
        }
        // Only errors thrown by a body are reported, not the reason a body never ran (see <doc:CoroutineLifecycle>).
        if let error, bodyRan, reportsUnobservedErrors, joiners == nil, !(error is CancellationError) {
            let handler = Coroutine.unobservedErrorHandler
            scheduler.execute { [self] in handler(self, error) }
        }
        // Taken, not copied: the reference is given up here anyway.
        if let parent = parent.take() {
            parent.withShared { s in
                let (previous, next) = (previousSibling, nextSibling)
                if s.cancelCursor?.toOpaque() == Unmanaged.passUnretained(self).toOpaque() { s.cancelCursor = next }
                if let previous {
                    previous._withUnsafeGuaranteedRef { $0.nextSibling = next }
                } else {
                    s.firstChild = next
                }
                next?._withUnsafeGuaranteedRef { $0.previousSibling = previous }
            }
            previousSibling = nil
            nextSibling = nil
        }
    }

    /// Finishes a coroutine whose body never ran (cancelled before start, stopped scheduler, no
    /// stack). Callers may merely borrow it: the registry's reference, given back here, can be
    /// the only one (a `Coroutine.async` coroutine has no other), so it holds one of its own.
    func finishUnstarted(_ error: any Error) {
        let keep = Unmanaged.passRetained(self)
        // The body keeps the observer alive (see `unstartedObserver`): released only after it.
        let body = self.body.take()
        unstartedObserver?.coroutineNeverRan(error)
        withExtendedLifetime(body) {}
        finish(error: error, bodyRan: false)
        scheduler.unregister(self)
        keep.release()
    }
}

extension Coroutine {
    /// Finishes a coroutine launched in a forked child with `CoroutineError.forkedProcess`,
    /// without running its body (``ForkGuard`` invariant 3). It was never linked to a parent, nor
    /// registered or queued anywhere: only this coroutine's own state and its observer (the
    /// promise) are touched, no scheduler's lock, queue or descriptor.
    /// - Parameter entry: The coroutine, with the reference (+1) a registry would have kept;
    ///   given back here.
    func finishInForkedChild(_ entry: Unmanaged<Coroutine>) {
        let body = self.body.take()
        unstartedObserver?.coroutineNeverRan(CoroutineError.forkedProcess)
        withExtendedLifetime(body) {}
        finish(error: CoroutineError.forkedProcess, bodyRan: false)
        entry.release()
    }
}

// MARK: 4. Reap

extension CoroutineScheduler {
    /// Releases the stack of a coroutine that finished and switched back to the loop, and
    /// unlinks it from the registry. Returns whether it was linked: the caller then gives back
    /// the registry's reference (after it stops using `c`).
    func reap(_ c: Coroutine) -> Bool {
        releaseStack(of: c)
        if let n = c.cName {
            free(n)
            c.cName = nil
        }
        return unlink(c)
    }
}
