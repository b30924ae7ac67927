import CCoroutines
import Dispatch
import Synchronization

/// Making coroutines ready and handing work to the loop, from its own thread (straight onto
/// the run queue or the jobs) or from any other (through the incoming queue and one coalesced
/// wake-up of the poller).
extension CoroutineScheduler {
    /// Coroutines and jobs posted from other threads, and whether the scheduler has closed
    /// (then nothing more is accepted). Guarded by `incoming`'s lock.
    struct Incoming {
        var items: [Runnable] = []
        var closed = false
    }

    /// Makes a suspended coroutine whose suspension was claimed ready. Any thread.
    ///
    /// On this scheduler's thread it is queued without a reference (``CoroutineQueue``). From
    /// another thread it goes through the incoming queue, which keeps a reference, and runs
    /// after it has finished switching out.
    func makeReady(_ c: Coroutine) {
        if isOnOwnThread {
            c.status = .ready
            if let r = c.record { ccoro_prefetch_frames(&r.pointee.context, 2) }
            runQueue.append(Unmanaged.passUnretained(c))
        } else {
            // Once `c` is in the incoming queue, its loop may run it to its end at once; the
            // caller may hold no reference (a ``ClaimedCoroutine``), and borrows this scheduler
            // through `c`: keep `c` alive until `post` returns.
            let keep = Unmanaged.passRetained(c)
            let accepted = post(.coroutine(c))
            keep.release()
            precondition(accepted, "internal inconsistency: a suspended coroutine on stopped scheduler \(name)")
        }
    }

    /// Runs `job` on the scheduler's loop (outside any coroutine). Any thread. If the scheduler
    /// has stopped, the job runs on a pool scheduler instead.
    @usableFromInline
    func execute(_ job: @escaping @Sendable () -> Void) {
        if isOnOwnThread {
            drainIncoming()   // jobs posted from other threads earlier run first
            jobs.append(job)
        } else if !post(.job(job)) {
            SchedulerPool.default(for: .default).next().execute(job)
        }
    }

    /// Appends to the incoming queue; false if the scheduler has stopped.
    func post(_ item: Runnable) -> Bool {
        let accepted = incoming.locked { s in
            if s.closed { return false }
            s.items.append(item)
            return true
        }
        guard accepted else { return false }
        incomingCount.add(1, ordering: .sequentiallyConsistent)
        if parked.load(ordering: .sequentiallyConsistent) { wakeLoop() }
        return true
    }

    /// Wakes the loop if it is parked in the poller.
    func wakeLoop() {
        // Not parked: the loop looks at the queue and the flags before it parks again.
        if parked.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent).exchanged {
            poller.wake()
        }
    }

    /// Moves what other threads posted onto the run queue and the jobs. Scheduler thread only.
    func drainIncoming() {
        guard incomingCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        let items = incoming.locked { s in
            let items = s.items
            s.items = []
            return items
        }
        incomingCount.subtract(items.count, ordering: .sequentiallyConsistent)
        for item in items {
            switch item {
            case .coroutine(let c):
                c.status = .ready
                runQueue.append(Unmanaged.passUnretained(c))
            case .job(let job):
                jobs.append(job)
            }
        }
    }
}
