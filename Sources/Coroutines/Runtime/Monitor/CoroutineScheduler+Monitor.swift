import CCoroutines
import Synchronization

/// The scheduler's side of the stall monitor (``StallMonitor``): the switch counter and the
/// running coroutine its thread records, the calls that start and wake the monitor, and what the
/// monitor and `dumpAll()` read back.
extension CoroutineScheduler {
    // MARK: Scheduler thread

    /// Records a switch into `c`. Scheduler thread only; two relaxed stores (the counter's new
    /// value is computed from a relaxed load: only this thread writes it).
    @inline(__always)
    func noteSwitch(to c: Coroutine) {
        switchCount.store(switchCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        runningCoroutine.store(Unmanaged.passUnretained(c).toOpaque(), ordering: .relaxed)
    }

    /// Records that the loop runs again, after a coroutine switched back to it (before a
    /// finished one is reaped: ``StallMonitor`` invariant 4). Scheduler thread only.
    @inline(__always)
    func noteBackOnLoop() {
        switchCount.store(switchCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        runningCoroutine.store(nil, ordering: .relaxed)
    }

    /// Runs a job of the loop, recorded as a switch to it and back (so each job is watched on
    /// its own, and named as a job if it stalls). Scheduler thread only.
    @inline(__always)
    func runLoopJob(_ job: () -> Void) {
        switchCount.store(switchCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        runningCoroutine.store(Self.jobMarker, ordering: .relaxed)
        job()
        switchCount.store(switchCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        runningCoroutine.store(nil, ordering: .relaxed)
    }

    /// Stands in `runningCoroutine` while the loop runs a job; never dereferenced. (Computed: a
    /// stored static would be checked for initialisation at every use.)
    @inline(__always)
    static var jobMarker: UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(bitPattern: 0x20).unsafelyUnwrapped
    }

    /// Records that the loop stopped being parked (after it cleared P in `lifecycle`), and wakes
    /// the monitor if it waits for a busy scheduler. Scheduler thread only.
    @inline(__always)
    func noteUnparked() {
        switchCount.store(switchCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        StallMonitor.shared.schedulerUnparked()
    }

    /// Starts the monitor or wakes it: this scheduler is now driven by the calling thread (after
    /// it set D in `lifecycle`).
    func noteDriveStarted() {
        drivingThreadID.store(ccoro_thread_id(), ordering: .relaxed)
        StallMonitor.shared.schedulerStartedDriving()
    }

    // MARK: Monitor thread

    /// One sample of this scheduler by the monitor: whether it is busy (driven and not parked),
    /// and the stall to report now, if any (see ``StallWatch``; `afterGap`: the previous sample
    /// is too long ago to time a stall across). Monitor thread only.
    func takeStallSample(now: UInt64, threshold: UInt64, afterGap: Bool) -> (busy: Bool, stall: StallWatch.Stall?) {
        // Sequentially consistent: the monitor's look after announcing its wait (invariant 3).
        let busy = lifecycle.load().isBusy
        let count = switchCount.load(ordering: .relaxed)
        let thread = drivingThreadID.load(ordering: .relaxed)
        let stall = stallWatch.locked {
            $0.observe(count: count, busy: busy, now: now, threshold: threshold, afterGap: afterGap,
                       times: { ThreadTimes.read(thread: thread, at: now) })
        }
        return (busy, stall)
    }

    /// What runs on this scheduler, if its switch count is still `count`: a coroutine or a job.
    /// Nil if the count has moved on (the stall ended), or if the loop runs its own bookkeeping
    /// (starting and reaping coroutines, timers, polling), which is not reported. Read under the
    /// registry lock, which keeps the coroutine that `runningCoroutine` names alive
    /// (``StallMonitor`` invariant 4). Monitor thread only.
    func stallSubject(ifStillAt count: UInt) -> StallSubject? {
        withRegistry { _ in
            guard switchCount.load(ordering: .relaxed) == count,
                  let p = runningCoroutine.load(ordering: .relaxed) else { return nil }
            if p == Self.jobMarker { return .job }
            return Unmanaged<Coroutine>.fromOpaque(p)._withUnsafeGuaranteedRef { c in
                .coroutine(c.name.map { "coroutine '\($0)'" } ?? c.description)
            }
        }
    }

    // MARK: Any thread

    /// How long `c`, running on this scheduler, has been running, in nanoseconds, as the
    /// monitor's samples tell (up to one sampling interval short); nil if `c` is not the running
    /// coroutine or no sample has seen this run yet (or the monitor is off). Any thread; `c` is
    /// only compared, never dereferenced.
    func runningTime(of c: Coroutine) -> UInt64? {
        guard runningCoroutine.load(ordering: .relaxed) == Unmanaged.passUnretained(c).toOpaque() else { return nil }
        let count = switchCount.load(ordering: .relaxed)
        let watch = stallWatch.locked { $0 }
        return watch.runningTime(count: count, now: ccoro_now_ns())
    }
}
