import CCoroutines
import Dispatch
import Synchronization

/// Making coroutines ready and handing work to the loop, from its own thread (straight onto
/// the run queue or the jobs) or from any other (through the incoming queue and one coalesced
/// wake-up of the poller).
extension CoroutineScheduler {
    /// Makes a suspended coroutine whose suspension was claimed ready. Any thread.
    ///
    /// On this scheduler's thread it is queued without a reference (``CoroutineQueue``). From
    /// another thread it goes through the incoming queue (``WakeUpQueue``: through its own
    /// link, without a reference; the registry keeps it alive), and runs after it has finished
    /// switching out.
    func makeReady(_ c: Coroutine) {
        if isOnOwnThread {
            c.status = .ready
            if let r = c.record { ccoro_prefetch_frames(&r.pointee.context, 2) }
            runQueue.append(Unmanaged.passUnretained(c))
        } else {
            // Once `c` is in the incoming queue, its loop may run it to its end at once; the
            // caller may hold no reference (a ``ClaimedCoroutine``), and borrows this scheduler
            // through `c`: keep `c` alive until `post` returns (it may look at `lifecycle` and
            // wake the poller after the push). Reference counting, not an allocation.
            let keep = Unmanaged.passRetained(c)
            let accepted = post(.coroutine(c))
            keep.release()
            precondition(accepted, "internal inconsistency: a suspended coroutine on stopped scheduler \(name)")
        }
    }

    /// Makes `c` (whose suspension was claimed) ready to run *next*, before everything in the run
    /// queue, when called on this scheduler's own thread: the requester of a direct
    /// `CoroutineActor.request`, resumed by its actor when the actor did not switch straight back
    /// to it (`Mailbox` invariant 8), as Go's `runnext` slot
    /// (runtime `proc.go`, `runqput` with `next`). A stated exception to FIFO wake-up order
    /// (<doc:ThreadsSchedulersAndCoroutines>), bounded: after ``handoffLimit`` hand-offs in a row
    /// one goes to the back, so a pair handing off to each other cannot starve the queue. "In a
    /// row": at most two switches (`switchCount`: the one into the coroutine handed to, and a turn
    /// of the loop) since the previous hand-off; any other coroutine's turn in between starts the
    /// count again. From another thread, the same as ``makeReady(_:)``.
    /// - Complexity: O(1) amortised.
    func makeReadyNext(_ c: Coroutine) {
        guard isOnOwnThread else { return makeReady(c) }
        c.status = .ready
        if let r = c.record { ccoro_prefetch_frames(&r.pointee.context, 2) }
        let switches = switchCount.load(ordering: .relaxed)
        if switches &- lastHandoffSwitch > 2 { handoffStreak = 0 }   // others ran in between
        lastHandoffSwitch = switches
        if handoffStreak < Self.handoffLimit {
            handoffStreak += 1
            runQueue.prepend(Unmanaged.passUnretained(c))
        } else {
            handoffStreak = 0
            runQueue.append(Unmanaged.passUnretained(c))
        }
    }

    /// Hand-offs to the front of the run queue before one goes to the back (``makeReadyNext(_:)``).
    @inlinable static var handoffLimit: Int { 32 }

    /// Runs `job` on the scheduler's loop (outside any coroutine). Any thread. If the scheduler
    /// has stopped, the job runs on a pool scheduler instead.
    @usableFromInline
    func execute(_ job: @escaping @Sendable () -> Void) {
        if isOnOwnThread {
            drainIncoming()   // jobs posted from other threads earlier run first
            jobs.append(LoopJob(run: job))
        } else if !post(.job(job)) {
            SchedulerPool.default(for: .default).next().execute(job)
        }
    }

    /// Appends to the incoming queue (``WakeUpQueue``); false if the scheduler has stopped (its
    /// queue is closed). A coroutine is queued through its own link, without a lock or an
    /// allocation; a job takes one allocation (its ``IncomingJob`` node).
    func post(_ item: Runnable) -> Bool {
        let outcome: WakeUpQueue.PushOutcome
        switch item {
        case .coroutine(let c):
            outcome = incoming.push(.coroutine(Unmanaged.passUnretained(c)))
        case .job(let job):
            let node = Unmanaged.passRetained(IncomingJob(job))
            outcome = incoming.push(.job(node))
            if case .refused = outcome { node.release() }
        }
        switch outcome {
        case .refused: return false
        case .accepted: return true   // the pusher into the empty queue wakes the loop
        case .acceptedIntoEmpty:
            // Dekker's pattern with the parking loop (`SchedulerLifecycle.swift`, ordering a).
            if lifecycle.load().isParked { wakeLoop() }
            return true
        }
    }

    /// Whether other threads posted work that the loop has not taken in yet (a relaxed
    /// snapshot; see ``WakeUpQueue/hasEntriesOrdered`` for the check before parking).
    var hasIncoming: Bool { incoming.hasEntries }

    /// Wakes the loop if it is parked in the poller.
    func wakeLoop() {
        // Not parked: the loop looks at the queue and the lifecycle before it parks again.
        // Whoever clears P wakes the poller, once.
        if lifecycle.apply(.wake, kind: kind).old.isParked {
            poller.wake()
        }
    }

    /// Moves what other threads posted onto the run queue and the jobs, in the order it was
    /// posted. Scheduler thread only.
    func drainIncoming() {
        guard incoming.hasEntries else { return }
        incoming.takeAll { entry in
            switch entry {
            case .coroutine(let u):
                u._withUnsafeGuaranteedRef { $0.status = .ready }
                runQueue.append(u)
            case .job(let node):
                jobs.append(LoopJob(run: node.takeRetainedValue().run))
            }
        }
    }
}
