import CCoroutines
import Synchronization

/// Taking coroutines off the run queue. All of this runs on the scheduler's own thread.
///
/// The run queue (``CoroutineQueue``) holds ready coroutines and, for each `Coroutine.async`
/// launch whose coroutine is not created yet, a ``launchMarker`` standing for the oldest
/// ``PendingLaunch``. ``popRunnable()`` and ``popQueuedRunnable(if:)`` are the only ways to take an
/// entry off, and they create the coroutine a marker stands for (``materializeLaunch()``): no
/// caller outside this file sees a marker.
extension CoroutineScheduler {
    /// Takes the head of the run queue off: a ready coroutine, or the coroutine of the oldest
    /// pending launch, created now. Nil if the queue is empty.
    ///
    /// The coroutine is borrowed from the registry, which keeps it alive (``CoroutineQueue``).
    /// - Complexity: O(1).
    ///
    /// On a pool scheduler, the oldest unstarted pool launch when the run queue is empty, and
    /// every 61st turn before the run queue (``popPoolRunnable()``).
    @inline(__always)
    func popRunnable() -> Unmanaged<Coroutine>? {
        if _slowPath(launchQueue != nil) { return popPoolRunnable() }
        guard let queued = runQueue.popFirst() else { return nil }
        return queued.isLaunchMarker ? materializeLaunch() : queued
    }

    /// Takes the head of the run queue off if `canRun` accepts it, as ``popRunnable()`` does.
    /// A head that `canRun` refuses stays at the head; if it was a launch marker, its coroutine
    /// (created now, for `canRun` to look at) takes the marker's place.
    /// On a pool scheduler, ``popPoolRunnable(if:)`` is the one to call.
    /// - Complexity: O(1), plus `canRun`.
    @inline(__always)
    func popQueuedRunnable(if canRun: (Coroutine) -> Bool) -> Unmanaged<Coroutine>? {
        guard let queued = runQueue.peek(0) else { return nil }
        var head = queued
        if queued.isLaunchMarker {
            head = materializeLaunch()
            runQueue.replaceFirst(with: head)
        }
        guard head._withUnsafeGuaranteedRef(canRun) else { return nil }
        return runQueue.popFirst()
    }

    /// Starts loading what the next few switches will touch, a step of the chain per switch:
    /// the frames of the coroutine that runs after `next` (its object and stack record came in
    /// during the last two switches), the stack record of the one after it, and the object of
    /// the third. With thousands of coroutines taking turns (a pipeline of channels), each of
    /// these is otherwise a cache miss, one after the other, on every switch.
    @inline(__always)
    func prefetchAhead() {
        guard let first = runQueue.peek(0), !first.isLaunchMarker else { return }
        if let r = first._withUnsafeGuaranteedRef({ $0.record }) { ccoro_prefetch_frames(&r.pointee.context, 4) }
        guard let second = runQueue.peek(1), !second.isLaunchMarker else { return }
        if let r = second._withUnsafeGuaranteedRef({ $0.record }) { ccoro_prefetch(r) }
        guard let third = runQueue.peek(2), !third.isLaunchMarker else { return }
        ccoro_prefetch(third.toOpaque())
    }

    /// Stands in the run queue for the oldest ``PendingLaunch``; never dereferenced. (Computed:
    /// a stored static would be checked for initialisation at every use.)
    @inline(__always)
    static var launchMarker: Unmanaged<Coroutine> {
        .fromOpaque(UnsafeRawPointer(bitPattern: 0x10).unsafelyUnwrapped)
    }

    /// Creates the coroutine of the oldest pending launch: links it to its parent and registers
    /// it, as `Coroutine.async` does, but does not queue it (it takes its marker's place); its
    /// promise links it when the body starts. Returns it borrowed from the registry.
    func materializeLaunch() -> Unmanaged<Coroutine> {
        let (launch, body) = pendingLaunches.popFirst()
        pendingLaunchCount.store(pendingLaunches.count, ordering: .relaxed)
        // The reference it is created with becomes the registry's.
        let entry = Unmanaged.passRetained(Coroutine(scheduler: self, name: nil, stackSize: nil,
                                                     reportsUnobservedErrors: false,
                                                     unstartedObserver: launch.observer, body: consume body))
        entry._withUnsafeGuaranteedRef { c in
            // The launch's reference to the parent becomes the child's.
            c.link(parentReference: launch.parent)
            // Launched before a `cancelAll` (a stop, runBlocking's body threw, Coroutine.run's
            // task was cancelled): it would have cancelled the coroutine, even if the parent has
            // finished since (and so was not cancelled with it).
            if launch.cancelAllCount != cancelAllCount { c.cancelledFlag.store(true, ordering: .sequentiallyConsistent) }
            register(entry)
            c.status = .ready
        }
        return entry
    }

    /// Takes every job and coroutine off the queues of a closing scheduler (the coroutines of
    /// pending launches are created now): ``close()`` runs the jobs and finishes the coroutines
    /// as stopped.
    func drainRunQueue() -> [Runnable] {
        var items: [Runnable] = []
        while let job = jobs.popFirst() { items.append(.job(job.run)) }
        while let u = popRunnable() { items.append(.coroutine(u.takeUnretainedValue())) }
        return items
    }

    /// Whether a pool launch waits in this scheduler's own queue. Its own thread.
    var hasLocalLaunches: Bool {
        guard let q = launchQueue else { return false }
        return !q.isEmpty
    }
}
