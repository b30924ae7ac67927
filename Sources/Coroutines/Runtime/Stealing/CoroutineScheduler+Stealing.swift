import CCoroutines
import Synchronization

/// A pool scheduler's side of stealing, all on its own thread: starting the pool launches it
/// takes, taking them in a fair order among its wake-ups, finding some at a peer or in the
/// pool's shared queue when it has none, and the spinning count (Go's `findRunnable`,
/// `runqsteal`, `resetspinning` in `runtime/proc.go`; see <doc:PoolsAndStealing>).
///
/// Order: coroutines that start here start in the order they were queued here. Between
/// wake-ups (the run queue) and unstarted pool launches no order holds, but every 61st turn
/// takes a launch first (first from the pool's shared queue, as Go's `schedtick % 61`), so
/// neither starves the other.
extension CoroutineScheduler {
    /// How often a turn takes an unstarted launch before the run queue (Go's constant).
    static let launchTurnInterval: UInt32 = 61

    /// ``popRunnable()`` for a pool scheduler: the head of the run queue or the newest unstarted
    /// launch of the stack (else the ring's oldest), started now; on a launch turn, a launch
    /// first (the shared queue's, the ring's oldest, else the stack's newest).
    /// - Complexity: O(1) (amortised, when a share of the shared queue is taken).
    @inline(__always)
    func popPoolRunnable() -> Unmanaged<Coroutine>? {
        launchQueueUnretained.unsafelyUnwrapped._withUnsafeGuaranteedRef { launches in
            schedulingTick &+= 1
            if launchIsDue || schedulingTick % Self.launchTurnInterval == 0 {
                launchIsDue = false
                if let l = poolReference.unsafelyUnwrapped._withUnsafeGuaranteedRef({ $0.takeInjected(for: self, max: 1) }) ?? launches.pop() {
                    return startPoolLaunch(l)
                }
                // The ring is empty: the stack's newest, or a coroutine that never leaves the run
                // queue (a yield loop) would keep the stack's launches from starting forever.
                if let c = launches.popNewest() { return startPoolLaunch(PoolLaunch(coroutine: c)) }
            }
            if let queued = runQueue.popFirst() {
                return queued.isLaunchMarker ? materializeLaunch() : queued
            }
            if let c = launches.popNewest() { return startPoolLaunch(PoolLaunch(coroutine: c)) }
            if let l = launches.pop() { return startPoolLaunch(l) }
            return nil
        }
    }

    /// ``popQueuedRunnable(if:)`` for a pool scheduler: the run queue's head, or, when the run
    /// queue is empty, the newest unstarted launch of the stack, else the ring's oldest (started
    /// now, and left at the head of the run queue if `canRun` refuses it). When a launch's turn
    /// is due, nil: the loop takes it.
    @inline(__always)
    func popPoolRunnable(if canRun: (Coroutine) -> Bool) -> Unmanaged<Coroutine>? {
        launchQueueUnretained.unsafelyUnwrapped._withUnsafeGuaranteedRef { launches in
            schedulingTick &+= 1
            if schedulingTick % Self.launchTurnInterval == 0 && !launches.isEmpty {
                launchIsDue = true
                return nil
            }
            guard runQueue.isEmpty else { return popQueuedRunnable(if: canRun) }
            let entry: Unmanaged<Coroutine>
            if let c = launches.popNewest() {
                entry = startPoolLaunch(PoolLaunch(coroutine: c))
            } else if let l = launches.pop() {
                entry = startPoolLaunch(l)
            } else {
                return nil
            }
            if entry._withUnsafeGuaranteedRef(canRun) { return entry }
            runQueue.append(entry)
            return nil
        }
    }

    /// Starts a pool launch taken from a queue: places its coroutine here (creating it if the
    /// launch has none yet), links it to its parent and registers it. Returns it borrowed from
    /// the registry, ready to run. During a stop it starts cancelled (its body never runs).
    func startPoolLaunch(_ launch: consuming PoolLaunch) -> Unmanaged<Coroutine> {
        var launch = launch
        let entry: Unmanaged<Coroutine>
        if let created = launch.coroutine {
            entry = created
            // Its placement is final from here: only this thread could still move it.
            entry._withUnsafeGuaranteedRef { $0.placementValue.store(.passUnretained(self), ordering: .relaxed) }
        } else {
            // Unwrapped without a generic helper (`take()`): passing a closure through a generic
            // function wraps it in two reabstraction thunks, each allocated.
            let body = launch.body!
            launch.body = nil
            // The reference it is created with becomes the registry's. Created here, it is placed
            // for good: it keeps this scheduler alive, not the pool (whose reference count every
            // scheduler of the pool would otherwise touch for every coroutine it starts).
            entry = Unmanaged.passRetained(Coroutine(scheduler: self, name: nil, stackSize: nil,
                                                     reportsUnobservedErrors: false,
                                                     unstartedObserver: launch.observer, body: body))
            if let parent = launch.parent {
                // The launch's reference to the parent becomes the child's.
                entry._withUnsafeGuaranteedRef { $0.link(parentReference: parent) }
            }
        }
        entry._withUnsafeGuaranteedRef { c in
            if lifecycle.loadRelaxed().isStopRequested { c.cancelledFlag.store(true, ordering: .sequentiallyConsistent) }
            register(entry)
            c.status = .ready
        }
        return entry
    }

    /// Creates the coroutine of a pool launch made on this scheduler's thread (which has none
    /// yet) as an unstarted pool launch queued here: a peer may still take it. The launch's
    /// parent reference becomes the coroutine's link to its parent. Returns it (+1).
    func createPoolLaunchCoroutine(_ launch: inout PoolLaunch, pool: SchedulerPool) -> Unmanaged<Coroutine> {
        // Unwrapped without a generic helper (see startPoolLaunch).
        let body = launch.body!
        launch.body = nil
        let entry = Unmanaged.passRetained(Coroutine(scheduler: self, pool: pool, name: nil, stackSize: nil,
                                                     reportsUnobservedErrors: false,
                                                     unstartedObserver: launch.observer, body: body))
        if let parent = launch.parent {
            launch.parent = nil
            entry._withUnsafeGuaranteedRef { $0.link(parentReference: parent) }
        }
        return entry
    }

    /// When the run queue, the jobs and the local launches are empty: takes pool launches from
    /// the pool's shared queue or, failing that, about half of a peer's (Go's `globrunqget`,
    /// then `stealWork`), and queues the first to run. Returns whether it found any.
    /// - Complexity: O(schedulers) to look, O(launches taken) to take.
    func findPoolWork() -> Bool {
        guard let pool, let queue = launchQueue else { return false }
        guard let l = pool.takeInjected(for: self, max: Int(LaunchQueue.capacity) / 2) ?? steal(in: pool, into: queue) else {
            return false
        }
        if isSpinning { stopSpinning() }
        runQueue.append(startPoolLaunch(l))
        return true
    }

    /// Takes about half of the unstarted launches of the first peer that has some, starting at
    /// a random peer: the oldest is returned, the rest go to `queue` (this scheduler's, empty).
    private func steal(in pool: SchedulerPool, into queue: LaunchQueue) -> PoolLaunch? {
        let n = pool.schedulers.count
        guard n > 1 else { return nil }
        let start = Int(nextRandom() % UInt64(n))
        for i in 0..<n {
            let victim = pool.schedulers[(start + i) % n]
            if victim === self { continue }
            if let l = queue.steal(from: victim.launchQueue.unsafelyUnwrapped) { return l }
        }
        // Every ring is empty: one launch from a peer's last-in first-out stack (Go steals
        // `runnext` last, too).
        for i in 0..<n {
            let victim = pool.schedulers[(start + i) % n]
            if victim === self { continue }
            if let c = queue.stealNewest(from: victim.launchQueue.unsafelyUnwrapped) { return PoolLaunch(coroutine: c) }
        }
        return nil
    }

    /// Starts counting this scheduler as spinning, if the pool's rule allows. Returns whether it
    /// spins.
    func startSpinning() -> Bool {
        guard let pool else { return true }
        if isSpinning { return true }
        guard pool.maySpin else { return false }
        isSpinning = true
        pool.spinning.add(1, ordering: .sequentiallyConsistent)
        return true
    }

    /// This scheduler found work while counted as spinning: it stops spinning, and if nobody
    /// spins any more, wakes an idle peer to look for more (Go's `resetspinning`: a burst of
    /// launches wakes schedulers one after the other).
    func stopSpinning() {
        isSpinning = false
        let pool = self.pool.unsafelyUnwrapped
        if pool.spinning.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 {
            pool.wakeIdleSchedulerIfNeeded()
        }
    }

    /// This scheduler stops spinning without work, about to park.
    func giveUpSpinning() {
        guard isSpinning else { return }
        isSpinning = false
        pool.unsafelyUnwrapped.spinning.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// Takes this pool scheduler out of its pool's idle list after a park (or a decision not to
    /// park); if a waker took it out already, it is counted as spinning.
    func leaveIdle() {
        guard let pool else { return }
        if !pool.leaveIdle(self) { isSpinning = true }
    }

    /// Whether a pool launch could be taken here: at a peer or in the pool's shared queue.
    /// False for other schedulers. Any thread; a snapshot.
    var poolHasLaunchesToTake: Bool {
        pool?.hasLaunchesToTake(besides: self) ?? false
    }
}
