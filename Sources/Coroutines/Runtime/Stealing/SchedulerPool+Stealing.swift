import CCoroutines
import Synchronization

/// The pool's side of stealing: where a pool launch is queued, the shared queue for launches
/// from outside the pool, and which idle scheduler to wake (Go's `runqput`/`globrunqput`,
/// `wakep`, `pidleput`/`pidleget` in `runtime/proc.go`; see <doc:PoolsAndStealing>).
///
/// ## Invariants
/// - Every pool launch is, until a scheduler takes it to start it, in exactly one place: one
///   scheduler's ``LaunchQueue`` or `shared`. It is started once, by one scheduler.
/// - `shared` closes once (``stop()``); after that nothing is added to it and every new pool
///   launch finishes with `CoroutineError.schedulerStopped`.
/// - `idle` holds each parked scheduler at most once; a scheduler taken out of it by
///   ``wakeIdleSchedulerIfNeeded()`` is counted in `spinning` until it finds work or parks again
///   (``CoroutineScheduler/stopSpinning()``).
/// - `spinning` ≤ the number of schedulers; a launch wakes an idle scheduler only when nobody
///   spins, so at most one wake-up is in flight per burst of launches (a woken scheduler that
///   finds work wakes the next: Go's `resetspinning`).
extension SchedulerPool {
    /// Queues a pool launch: on the calling thread's scheduler if it belongs to this pool (no
    /// lock: on top of its ``LaunchQueue``'s last-in first-out stack, the coroutine created now
    /// if the launch has none), else in the shared queue; then wakes an idle scheduler if nobody
    /// is looking for work. A launch onto a stopped pool finishes with
    /// `CoroutineError.schedulerStopped`. Any thread.
    /// - Complexity: O(1) amortised (O(``LaunchQueue/capacity``) when the ring is full, once per
    ///   half of it).
    func submit(_ launch: consuming PoolLaunch) {
        if let s = localScheduler() {
            let entry = launch.coroutine ?? s._withUnsafeGuaranteedRef { $0.createPoolLaunchCoroutine(&launch, pool: self) }
            s._withUnsafeGuaranteedRef { $0.launchQueue.unsafelyUnwrapped.pushNewest(entry, overflow: { inject($0) }) }
        } else {
            let words = LaunchQueue.words(moving: launch)
            withUnsafePointer(to: words) { inject(UnsafeBufferPointer(start: $0, count: 1)) }
        }
        wakeIdleSchedulerIfNeeded()
    }

    /// The scheduler this thread drives, if it belongs to this pool and is not stopping.
    @inline(__always)
    private func localScheduler() -> Unmanaged<CoroutineScheduler>? {
        guard let p = ccoro_tls_scheduler() else { return nil }
        let s = Unmanaged<CoroutineScheduler>.fromOpaque(p)
        let local = s._withUnsafeGuaranteedRef { s in
            s.poolReference?.toOpaque() == Unmanaged.passUnretained(self).toOpaque()
                && !s.lifecycle.loadRelaxed().isStopRequested
        }
        return local ? s : nil
    }

    /// Queues a pool launch of `Coroutine.async` whose coroutine is created when it starts, as a
    /// child of the running coroutine (if any). `body` keeps `observer` (the promise) alive.
    @usableFromInline
    func submitUncreated(body: consuming @escaping () throws -> Void, observer: any UnstartedObserver) {
        if ForkGuard.isForkedChild {
            // Nothing queued, no parent linked (``ForkGuard`` invariant 3).
            return PoolLaunch(body: body, observer: observer, parent: nil).finishUnstarted(CoroutineError.forkedProcess)
        }
        let parent = ccoro_tls_coroutine().map { Unmanaged<Coroutine>.fromOpaque($0).retain() }
        submit(PoolLaunch(body: body, observer: observer, parent: parent))
    }

    /// Where a pool launch made on this thread is queued first: the scheduler this thread drives
    /// if it belongs to the pool, else the pool's first scheduler (standing for the shared
    /// queue). Any thread.
    @usableFromInline
    func firstPlacement() -> CoroutineScheduler {
        if let p = ccoro_tls_scheduler() {
            let s = Unmanaged<CoroutineScheduler>.fromOpaque(p)
            if s._withUnsafeGuaranteedRef({ $0.poolReference?.toOpaque() == Unmanaged.passUnretained(self).toOpaque() }) {
                return s.takeUnretainedValue()
            }
        }
        return schedulers[0]
    }

    /// Appends `launches` (which it owns) to the shared queue, or finishes them if the pool has
    /// stopped.
    func inject(_ launches: UnsafeBufferPointer<LaunchQueue.Words>) {
        if !shared.append(launches) {
            for w in launches { LaunchQueue.launch(moving: w).finishUnstarted(CoroutineError.schedulerStopped) }
        }
    }

    /// Takes a share of the shared queue (at most `max`) for `scheduler`, a scheduler of this
    /// pool on its own thread: returns the oldest and queues the rest of the share on
    /// `scheduler`'s ``LaunchQueue``, which must then have room for them (Go's `globrunqget`).
    /// Nil if the shared queue is empty.
    @inline(__always)
    func takeInjected(for scheduler: CoroutineScheduler, max: Int) -> PoolLaunch? {
        guard shared.launchCount.load(ordering: .relaxed) > 0 else { return nil }
        return takeInjectedShare(for: scheduler, max: max)
    }

    private func takeInjectedShare(for scheduler: CoroutineScheduler, max: Int) -> PoolLaunch? {
        let queue = scheduler.launchQueue.unsafelyUnwrapped
        var first: LaunchQueue.Words?
        _ = shared.take(max: max, share: schedulers.count) { w in
            if first == nil {
                first = w
            } else {
                queue.push(words: w, overflow: { _ in
                    preconditionFailure("internal inconsistency: a share of the shared queue overflowed a local queue")
                })
            }
        }
        return first.map { LaunchQueue.launch(moving: $0) }
    }

    /// Whether a scheduler other than `scheduler` has unstarted launches, or the shared queue
    /// has some. Any thread; a snapshot.
    /// - Complexity: O(schedulers).
    func hasLaunchesToTake(besides scheduler: CoroutineScheduler) -> Bool {
        if shared.launchCount.load(ordering: .sequentiallyConsistent) > 0 { return true }
        for s in schedulers where s !== scheduler {
            if let q = s.launchQueue, !q.isEmpty { return true }
        }
        return false
    }

    /// Whether a scheduler that found nothing may spin looking for work: Go's rule, while
    /// 2 × spinning < busy schedulers (busy: not parked), so that spinners never burn more than
    /// half of the CPUs that do work.
    var maySpin: Bool {
        2 * spinning.load(ordering: .relaxed) < schedulers.count - idleCount.load(ordering: .relaxed)
    }

    /// Wakes one parked scheduler to look for work, if one is parked and none is looking
    /// already (Go's `wakep`). Any thread.
    /// - Complexity: O(1) when nothing needs waking (two loads); else one lock and one poller
    ///   wake-up.
    @inline(__always)
    func wakeIdleSchedulerIfNeeded() {
        guard idleCount.load(ordering: .sequentiallyConsistent) > 0,
              spinning.load(ordering: .relaxed) == 0 else { return }
        wakeIdleScheduler()
    }

    private func wakeIdleScheduler() {
        // One wake-up per burst: whoever moves `spinning` from 0 wakes; the one woken wakes the
        // next when it finds work.
        guard spinning.compareExchange(expected: 0, desired: 1, ordering: .sequentiallyConsistent).exchanged else { return }
        let taken: Int? = idle.locked { list in
            guard let i = list.popLast() else { return nil }
            idleCount.subtract(1, ordering: .sequentiallyConsistent)
            return i
        }
        guard let taken else {
            spinning.subtract(1, ordering: .sequentiallyConsistent)
            return
        }
        // Counted as spinning from here; it sees that it was taken out of `idle` when it
        // wakes (``CoroutineScheduler/leaveIdle()``).
        schedulers[taken].wakeLoop()
    }

    /// Counts `scheduler` as idle, about to park. Its own thread.
    func enterIdle(_ scheduler: CoroutineScheduler) {
        idle.locked { list in
            list.append(scheduler.poolIndex)
            idleCount.add(1, ordering: .sequentiallyConsistent)
        }
    }

    /// Takes `scheduler` out of the idle list after it woke or did not park. Returns false if a
    /// waker had taken it out already: it is then counted as spinning. Its own thread.
    func leaveIdle(_ scheduler: CoroutineScheduler) -> Bool {
        idle.locked { list in
            guard let i = list.lastIndex(of: scheduler.poolIndex) else { return false }
            list.remove(at: i)
            idleCount.subtract(1, ordering: .sequentiallyConsistent)
            return true
        }
    }

    /// Stops every scheduler of a pool created with ``init(name:count:qos:)``: its coroutines are
    /// cancelled and unwound (as ``CoroutineScheduler/stop()`` does for one scheduler), pool
    /// launches that have not started are cancelled, and the threads end. Later launches onto
    /// the pool or its schedulers finish with `CoroutineError.schedulerStopped`. The default
    /// pools ignore it, and so does every pool in a child made by `fork()` (its threads do not
    /// exist there).
    ///
    /// - Suspends: no; returns at once (the unwinding happens on the schedulers' threads).
    ///   Thread-safe and idempotent.
    /// - Complexity: O(schedulers + launches in the shared queue).
    public func stop() {
        // In a forked child the pool's threads do not exist; its queues are copies of the
        // parent's, whose launches are the parent's to finish (ForkGuard).
        guard !isDefault, !ForkGuard.isForkedChild else { return }
        for w in shared.close() { LaunchQueue.launch(moving: w).finishUnstarted(CancellationError()) }
        for s in schedulers { s.requestStop() }
    }
}

extension PoolLaunch {
    /// Finishes a launch that will never start, with `error`, anywhere: its coroutine ends
    /// unstarted (or, for a launch whose coroutine does not exist yet, its observer is told), and
    /// the launch's references are given back.
    consuming func finishUnstarted(_ error: any Error) {
        if let entry = coroutine {
            entry._withUnsafeGuaranteedRef { $0.finishUnstarted(error) }
            entry.release()
        } else {
            // The body keeps the observer alive: released only after it was told.
            let body = self.body.take()
            observer?.coroutineNeverRan(error)
            withExtendedLifetime(body) {}
        }
        parent?.release()
    }
}
