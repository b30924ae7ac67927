import CCoroutines
import QueuePool
import Synchronization

/// The scheduler's loop: what its thread does between coroutines. It runs due timers, jobs
/// and ready coroutines, polls for I/O readiness, spins briefly when idle, then parks in the
/// poller until a timer is due, a descriptor is ready or another thread wakes it.
extension CoroutineScheduler {
    /// Drives the main scheduler on the main thread until ``stop()`` is called.
    ///
    /// Runs coroutines launched onto ``main`` and blocks submitted to `DispatchQueue.main`.
    /// After it returns, the main scheduler can be driven again.
    ///
    /// - Precondition: called on ``main``, on the main thread, not from a coroutine, not in a
    ///   child made by `fork()` (a fatal error there: the runtime's threads do not exist in it).
    /// - Suspends: no; it blocks the main thread until stopped.
    @available(*, noasync, message: "run() blocks the main thread")
    public func run() {
        precondition(kind == .main, "run() drives CoroutineScheduler.main only; other schedulers run on their own thread")
        precondition(isMainThread(), "CoroutineScheduler.main.run() must be called on the main thread")
        precondition(ccoro_tls_scheduler() == nil, "run() called while the main thread already drives a scheduler")
        if ForkGuard.isForkedChild { ForkGuard.forkedChildReturnedToLoop(name) }
        drive { self.lifecycle.load().isStopRequested && self.liveCount == 0 }
        endMainRun()
    }

    /// Makes the main scheduler drivable again after `run()` or a `runBlocking` on main.
    func endMainRun() {
        lifecycle.apply(.endMainRun, kind: kind)
    }

    /// Drives the scheduler on the calling thread until `done()` holds with nothing left to run.
    func drive(until done: () -> Bool) {
        let previous = ccoro_tls_scheduler()
        ccoro_tls_set_scheduler(Unmanaged.passUnretained(self).toOpaque())
        lifecycle.apply(.startDriving, kind: kind)
        noteDriveStarted()
        defer {
            lifecycle.apply(.endDriving, kind: kind)
            ccoro_tls_set_scheduler(previous)
        }
        ccoro_signal_prepare_thread()
        // Timers end within microseconds of their deadline while this thread drives a scheduler
        // (the kernel's default slack lets a timed wait end up to 50 µs late); the thread's own
        // setting comes back when the drive ends.
        let previousSlack = ccoro_set_timer_slack(Self.timerSlackNanoseconds)
        defer { if previousSlack >= 0 { _ = ccoro_set_timer_slack(previousSlack) } }
        prepareLoopRecord()
        if kind == .main && mainQueueFD < 0 {
            mainQueueFD = ccoro_dispatch_main_queue_fd()
            if mainQueueFD >= 0 { poller.watchPersistently(fd: mainQueueFD) }
        }
        while true {
            drainIncoming()
            runDueTimers()
            var pendingJobs = jobs.count
            while pendingJobs > 0, let job = jobs.popFirst() {
                runLoopJob(job.run)
                // A job that called fork() returned in the child (ForkGuard).
                if ForkGuard.isForkedChild { ForkGuard.forkedChildReturnedToLoop(name) }
                pendingJobs -= 1
            }
            var budget = 128
            while budget > 0, let u = popRunnable() {
                if isSpinning { stopSpinning() }
                resumeFromLoop(u)
                budget -= 1
            }
            if lifecycle.load().isStopPending {
                // Handled even while coroutines keep the run queue busy (e.g. yield loops).
                lifecycle.apply(.handleStop, kind: kind)
                cancelAll()
                continue
            }
            if !runQueue.isEmpty || !jobs.isEmpty || hasLocalLaunches {
                if !ioWaiters.isEmpty || pollTable.waiterCount > 0 || mainQueueFD >= 0 { poll(timeout: 0) }
                continue
            }
            if done() { break }
            if !runQueue.isEmpty || !jobs.isEmpty { continue }
            // A pool scheduler with nothing of its own takes unstarted launches from its pool.
            if findPoolWork() { continue }
            // A peer on another thread often answers within microseconds (a channel hand-off):
            // spinning briefly avoids the kernel round trip of parking and being woken. Only
            // while it pays off, though (see `spinMisses`), and on a pool, only while few of its
            // schedulers spin (`startSpinning`).
            let spun = spinMisses < Self.spinMissLimit && startSpinning()
            if spun {
                if spinForIncoming() { spinMisses = 0; continue }
                spinMisses += 1
            }
            giveUpSpinning()
            tidyHeapIfNeeded()
            lifecycle.apply(.park, kind: kind)
            pool?.enterIdle(self)
            // Re-checked after announcing the park (each writer changes its condition, then
            // wakes a parked loop): posted work, a stop request, or — a launch racing with stop
            // finishes its coroutine on the launching thread — nothing left to wait for; on a
            // pool, launches that it could take.
            if incoming.hasEntriesOrdered
                || lifecycle.load().isStopPending
                || done() || poolHasLaunchesToTake {
                lifecycle.apply(.unpark, kind: kind)
                leaveIdle()
                noteUnparked()
                continue
            }
            var timeout: UInt64? = nil
            let now = ccoro_now_ns()
            if let deadline = timers.nextDeadline {
                timeout = deadline > now ? deadline - now : 0
            }
            // Idle stacks' memory goes back to the kernel once the scheduler has stayed idle a
            // while, not at every park: a scheduler that parks between bursts of work would
            // otherwise release stacks that the next burst faults in again.
            let trimDue = StackAllocator.shared.needsTrim
            if trimDue { timeout = min(timeout ?? Self.idleTrimDelay, Self.idleTrimDelay) }
            let parkedAt = spun ? 0 : now
            poll(timeout: timeout)
            lifecycle.apply(.unpark, kind: kind)
            leaveIdle()
            noteUnparked()
            if trimDue && ccoro_now_ns() - now >= Self.idleTrimDelay { StackAllocator.shared.trimIfNeeded() }
            if !spun, hasIncoming,
               ccoro_now_ns() - parkedAt < Self.idleSpinNanoseconds {
                // Work posted from another thread came within the spin window: spinning would
                // have caught it without parking, so spin again.
                spinMisses = 0
            }
        }
        tidyHeapIfNeeded()
    }

    /// After many coroutines finished, has the C library merge the small blocks they freed
    /// (``ccoro_heap_consolidate``). Called when the loop runs out of work: before it parks, and
    /// when a drive ends. glibc merges freed small blocks only when something asks it for a
    /// large one, which a workload of coroutines alone never does; the blocks then pile up
    /// across bursts and every later allocation searches fragmented bins. Measured with skynet
    /// run repeatedly in one process: runs cycled through 0.5, 1.1 and 1.25 s until something
    /// merged them, and took 0.55–0.6 s each when every run ended with the merge.
    func tidyHeapIfNeeded() {
        guard reapedSinceHeapTidy >= Self.heapTidyInterval else { return }
        reapedSinceHeapTidy = 0
        ccoro_heap_consolidate()
    }

    /// How many coroutines must have been reaped before ``tidyHeapIfNeeded()`` acts: the merge
    /// walks every small freed block, so it pays off only after many.
    static let heapTidyInterval = 1 << 16

    /// Spins up to `idleSpinNanoseconds` waiting for work posted from another thread (or a
    /// stop request). Returns true if some arrived. Go's scheduler spins the same way before it
    /// parks an idle thread (runtime `proc.go`, "spinning" Ms).
    private func spinForIncoming() -> Bool {
        // On one CPU the peer that would post the work needs this very CPU: spinning only
        // delays it (Go does not spin with GOMAXPROCS=1 either).
        guard Self.spinningHelps else { return false }
        let deadline = ccoro_now_ns() + Self.idleSpinNanoseconds
        var i = 0
        while true {
            // A stop request is news only until the loop handled it: afterwards the loop waits
            // for its coroutines to end like any other work, without spinning all along.
            if hasIncoming || lifecycle.loadRelaxed().isStopPending { return true }
            // Peers' queues are looked at less often: that takes a load per peer.
            if i & 15 == 0 && poolHasLaunchesToTake { return true }
            ccoro_cpu_relax()
            i += 1
            if i & 63 == 0 && ccoro_now_ns() >= deadline { return false }
        }
    }

    /// How long a scheduler stays parked before it gives idle stacks' memory back.
    static let idleTrimDelay: UInt64 = 50_000_000

    /// The timer slack of a thread while it drives a scheduler (`ccoro_set_timer_slack`).
    static let timerSlackNanoseconds = 1_000

    /// How long an idle scheduler spins before it parks in the poller.
    static let idleSpinNanoseconds: UInt64 = 20_000

    /// After this many spins in a row found no work, the scheduler parks without spinning until
    /// work from another thread again arrives within `idleSpinNanoseconds` of parking. A scheduler
    /// driven by I/O readiness (sockets), which the spin cannot see, then stops burning the CPU
    /// its peers — a client, the kernel's network stack — need: the echo server spent a quarter
    /// of its CPU time in the spin.
    static let spinMissLimit = 3

    /// Whether the process may run on more than one CPU (its affinity mask), so that another
    /// thread can post work while this one spins.
    static let spinningHelps = activeProcessorCount() > 1
}
