import CCoroutines
import Dispatch
import Synchronization

/// A serial execution context for coroutines, backed by exactly one OS thread for its whole life.
///
/// A scheduler owns a run queue of ready coroutines, a timer heap (for `delay`, timeouts) and an
/// I/O readiness poller (epoll on Linux, kqueue on macOS). A coroutine that suspends switches
/// directly to the next ready coroutine; the scheduler's loop runs timers, I/O readiness, wake-ups
/// from other threads and jobs in between.
///
/// ```swift
/// let scheduler = CoroutineScheduler(name: "net")
/// Coroutine.launch(on: scheduler) { try Coroutine.waitUntilReadable(fd); … }
/// // …
/// scheduler.stop()
/// ```
///
/// ## Threading
/// Coroutines never migrate between threads: everything launched on a scheduler runs on its
/// thread (see <doc:ThreadsSchedulersAndCoroutines>). Wake-ups from other threads go through a
/// lock-free queue and one coalesced wake-up of the poller. Every method of this type is
/// thread-safe.
///
/// ## Kinds
/// * `CoroutineScheduler(name:qos:)` starts a dedicated thread that runs until ``stop()``.
/// * ``main`` is the main thread; it runs while the main thread drives it (``run()``, or
///   `Coroutine.runBlocking` on the main thread), and also runs blocks submitted to
///   `DispatchQueue.main` meanwhile (Linux).
/// * Schedulers of a ``SchedulerPool`` run until the pool stops (the default pools: for the whole
///   process), and share their unstarted pool launches (<doc:PoolsAndStealing>).
/// * `Coroutine.runBlocking` turns the calling thread into a temporary scheduler.
public final class CoroutineScheduler: @unchecked Sendable {
    enum Kind { case dedicated, main, pool, temporary }

    /// The scheduler's name (also its thread's name).
    public let name: String
    /// The quality-of-service class the scheduler's thread runs at.
    public let qos: DispatchQoS.QoSClass
    let kind: Kind

    // The state of every part of the runtime is stored here (Swift keeps stored properties in
    // the class declaration). Each property's comment begins with the part that owns it, whose
    // code is in `Runtime/<part>/CoroutineScheduler+<Aspect>.swift`. The order of declaration is
    // the object's layout, which the hot paths' cache behaviour depends on: measure before
    // reordering.

    // MARK: Confined to the driving thread

    /// Run queue (`RunQueue/`) — ready coroutines, FIFO.
    @exclusivity(unchecked) var runQueue = CoroutineQueue(capacity: 64)
    /// Run queue (`RunQueue/`) — `Coroutine.async` launches whose coroutine is not created yet,
    /// FIFO; each is matched by a ``launchMarker`` in `runQueue` (see ``PendingLaunch``).
    @exclusivity(unchecked) var pendingLaunches = PendingLaunchQueue(capacity: 64)
    /// Loop (`Scheduler/+Loop`) — coroutines reaped since the heap was last tidied
    /// (``tidyHeapIfNeeded()``).
    @exclusivity(unchecked) var reapedSinceHeapTidy = 0
    /// Loop (`Scheduler/+Loop`) — jobs to run on the loop's own stack (observers, timer
    /// bookkeeping), FIFO.
    @exclusivity(unchecked) var jobs = Ring<LoopJob>(capacity: 16)
    /// Timers (`Timers/`) — the armed timers, earliest deadline first. Changed only through
    /// ``armTimer(deadline:_:)``, ``disarmTimer(_:)`` and the loops of `+Timers` that pop due
    /// timers, which keep `armedTimerCount` equal to its count.
    @exclusivity(unchecked) var timers = TimerHeap()
    /// I/O (`IO/+DescriptorWait`) — one-shot waits for arbitrary descriptors, by descriptor.
    @exclusivity(unchecked) var ioWaiters: [Int32: IOWaiters] = [:]
    /// I/O (`IO/+SocketWait`) — edge-triggered registrations of ``PollDescriptor``s (sockets)
    /// and their waiters.
    @exclusivity(unchecked) var pollTable = PollTable()
    /// Lifecycle (`Lifecycle/`) — a coroutine that finished and switched back to the loop; its
    /// stack is released by the loop.
    @exclusivity(unchecked) var finishedCoroutine: Unmanaged<Coroutine>?
    /// Loop (`Scheduler/+Loop`) — consecutive idle spins that found no work (see
    /// `spinMissLimit`).
    @exclusivity(unchecked) var spinMisses = 0
    /// Switching (`Switching/`) — how many more direct coroutine-to-coroutine switches before the
    /// loop gets a turn.
    @usableFromInline @exclusivity(unchecked) var directBudget = 0
    /// Switching (`Switching/`) — an actor's coroutine parked in its mailbox without arming its
    /// wait, owned by this thread (`Mailbox` invariant 12): a coroutine of this thread may take it
    /// for a direct request with no compare-and-swap; the loop arms its wait as soon as it gets
    /// the thread back (``armActorOwnedByThread()``). At most one; nil otherwise.
    @usableFromInline @exclusivity(unchecked) var actorOwnedByThread: Unmanaged<Coroutine>?
    /// Wake-ups (`Scheduler/+WakeUps`) — hand-offs to the front of the run queue since one last
    /// went to the back (``makeReadyNext(_:)``: bounds how long they keep others waiting).
    @usableFromInline @exclusivity(unchecked) var handoffStreak = 0
    /// Wake-ups — `switchCount` at the last such hand-off (a gap of more than two switches ends a
    /// run of them).
    @usableFromInline @exclusivity(unchecked) var lastHandoffSwitch: UInt = 0
    /// Stacks (`Stacks/`) — default-size stacks kept by this scheduler (taken and given back
    /// without a lock).
    @exclusivity(unchecked) var stackCache: [UnsafeMutablePointer<ccoro_stack_record>] = []
    /// Stacks (`Stacks/`) — `stackCache.count` for readers on other threads
    /// (``StackAllocator/stacksInUse``). Only the scheduler's thread writes it, with plain
    /// stores: no read-modify-write per coroutine.
    let cachedStacks = Atomic<Int>(0)
    /// Run queue (`RunQueue/`) — `pendingLaunches.count` for `dumpAll()` on other threads; plain
    /// stores by this thread.
    let pendingLaunchCount = Atomic<Int>(0)
    /// Timers (`Timers/`) — `timers.count` for readers on other threads
    /// (``RuntimeResources/current``); plain stores by this thread, no read-modify-write.
    let armedTimerCount = Atomic<Int>(0)
    /// Random (`Scheduler/+Random`) — state of the scheduler's random generator (SplitMix64),
    /// used by `select`.
    @exclusivity(unchecked) var randomState: UInt64 = {
        var g = SystemRandomNumberGenerator()
        return g.next()
    }()
    /// Switching (`Switching/`) — the loop's own context (the thread's stack).
    let loopRecord: UnsafeMutablePointer<ccoro_stack_record>
    /// Stopping (`Scheduler/+Stopping`) — how many times ``cancelAll()`` ran on this thread (see
    /// ``PendingLaunch``).
    @exclusivity(unchecked) var cancelAllCount = 0
    /// I/O (`IO/+Polling`) — the descriptor that signals blocks queued on `DispatchQueue.main`
    /// (``main`` only; -1 until the main scheduler is first driven).
    @exclusivity(unchecked) var mainQueueFD: Int32 = -1
    /// Monitor (`Monitor/`) — advanced by one at every switch into a coroutine, every return to
    /// the loop, the start and end of every loop job and every exit from the poller. Only this
    /// thread writes it, with a plain load and store (never an atomic read-modify-write); the
    /// stall monitor samples it.
    @usableFromInline let switchCount = Atomic<UInt>(0)
    /// Monitor (`Monitor/`) — the coroutine switched to last (unretained), `jobMarker` while the
    /// loop runs a job, nil while it does its own work. Plain stores by this thread;
    /// dereferenced by the stall monitor only under `registryLock` (see ``StallMonitor``).
    let runningCoroutine = Atomic<UnsafeMutableRawPointer?>(nil)

    // MARK: Any thread

    /// I/O (`IO/`) — the readiness poller (epoll, kqueue), which the loop also parks in.
    let poller = Poller()
    /// Wake-ups (`Scheduler/+WakeUps`) — coroutines and jobs posted from other threads, and
    /// whether the scheduler has closed (then nothing more is accepted; `lifecycle` mirrors it);
    /// lock-free (``WakeUpQueue``).
    let incoming = WakeUpQueue()
    /// Lifecycle (`Scheduler/SchedulerLifecycle`) — whether a thread drives the scheduler,
    /// whether its loop is parked in the poller (or about to be, so that a poster must wake it),
    /// whether ``stop()`` was called and the loop acted on it, and whether it has closed: one
    /// byte, each change one atomic read-modify-write made by the thread the transitions table
    /// in `SchedulerLifecycle.swift` names (Loop, Wake-ups and Stopping make them).
    let lifecycle = AtomicSchedulerLifecycle()
    /// Registry (`Scheduler/+Registry`) — guards `registryState`. A spin lock: registering and
    /// unregistering only move links, and the owner thread takes it for every coroutine it
    /// starts and reaps (see ``SpinLock``).
    let registryLock = SpinLock()
    /// Registry (`Scheduler/+Registry`) — read and written only inside ``withRegistry(_:)``.
    /// Any thread.
    @exclusivity(unchecked) var registryState = Registry()
    /// Registry (`Scheduler/+Registry`) — serialises walks of the registry (one walk cursor).
    let registryWalkLock = FutexLock()
    /// Monitor (`Monitor/`) — what the stall monitor saw at its last samples; its thread writes
    /// it, `dumpAll()` reads it.
    let stallWatch = Mutex(StallWatch())
    /// Monitor (`Monitor/`) — the kernel id of the thread that drives this scheduler (0 before
    /// the first drive), for the monitor to tell a blocked thread from one starved of CPU.
    let drivingThreadID = Atomic<UInt64>(0)

    // MARK: Pool schedulers (`Stealing/`)

    /// Stealing — the pool this scheduler belongs to; set before its thread starts, never
    /// changed. Not retained: the pool owns its schedulers, and each pool scheduler's thread
    /// keeps the pool alive while it runs. (`Unmanaged`, so that the hot paths that look at it
    /// count no references.)
    @exclusivity(unchecked) var poolReference: Unmanaged<SchedulerPool>?
    /// Stealing — `poolReference`, as a reference.
    var pool: SchedulerPool? { poolReference?.takeUnretainedValue() }
    /// Stealing — the same pool, weakly, for threads that do not keep it alive (the stall
    /// monitor): a stopped pool may be freed while such a thread still holds this scheduler.
    weak var poolForOtherThreads: SchedulerPool?
    /// Stealing — the unstarted pool launches queued here, which idle peers may take (pool
    /// schedulers only).
    let launchQueue: LaunchQueue?
    /// Stealing — `launchQueue` without reference counting, for the turns of the scheduler's
    /// own thread (a retain and release per turn otherwise, on the cache line that thieves
    /// read); `launchQueue` keeps it alive.
    let launchQueueUnretained: Unmanaged<LaunchQueue>?
    /// Stealing — this scheduler's index in `pool.schedulers`.
    let poolIndex: Int
    /// Stealing — whether this scheduler is counted in `pool.spinning`. Its own thread.
    @exclusivity(unchecked) var isSpinning = false
    /// Stealing — turns taken by ``popRunnable()``, so that every 61st takes an unstarted
    /// launch first (Go's `schedtick`). Its own thread.
    @exclusivity(unchecked) var schedulingTick: UInt32 = 0
    /// Stealing — a direct switch found an unstarted launch's turn due and left it to the loop.
    /// Its own thread.
    @exclusivity(unchecked) var launchIsDue = false

    /// Creates a scheduler with its own thread, which runs until ``stop()``.
    ///
    /// - Parameters:
    ///   - name: The scheduler's and its thread's name.
    ///   - qos: The thread's priority class (on Linux: nice −2 for user-interactive and
    ///     user-initiated, 0 for default, +2 for utility, +10 for background).
    /// - Complexity: starts one thread.
    public convenience init(name: String, qos: DispatchQoS.QoSClass = .default) {
        self.init(name: name, qos: qos, kind: .dedicated)
        startThread()
    }

    init(name: String, qos: DispatchQoS.QoSClass, kind: Kind, poolIndex: Int = 0) {
        self.name = name
        self.qos = qos
        self.kind = kind
        self.poolIndex = poolIndex
        launchQueue = kind == .pool ? LaunchQueue() : nil
        launchQueueUnretained = launchQueue.map(Unmanaged.passUnretained)
        loopRecord = .allocate(capacity: 1)
        loopRecord.initialize(to: ccoro_stack_record())
        SchedulerDirectory.shared.add(self)
    }

    deinit {
        runQueue.deallocate()
        pendingLaunches.deallocate()
        jobs.deallocate()
        loopRecord.deallocate()
    }

    /// The scheduler of the main thread.
    ///
    /// Coroutines launched onto it run while the main thread drives it: ``run()`` or
    /// `Coroutine.runBlocking` on the main thread. Launching onto it is allowed before it is driven.
    public static let main = CoroutineScheduler(name: "main", qos: .userInteractive, kind: .main)

    /// The scheduler the calling thread drives, or nil on a plain thread.
    /// - Complexity: O(1). Thread-safe.
    public static var current: CoroutineScheduler? {
        guard let p = ccoro_tls_scheduler() else { return nil }
        return Unmanaged<CoroutineScheduler>.fromOpaque(p).takeUnretainedValue()
    }

    /// Where `launch(on: nil)` puts a coroutine (see <doc:CoroutineLifecycle>): the running
    /// coroutine's scheduler, else the scheduler this thread drives, else `main` on the main
    /// thread; a pool launch (`pool` not nil) if that is a pool scheduler, or on a plain thread
    /// (of the default pool). `scheduler` is where the launch is queued first. Neither is
    /// retained: each outlives the call (a pool scheduler through its pool).
    @usableFromInline
    static func defaultPlacement() -> (scheduler: Unmanaged<CoroutineScheduler>, pool: Unmanaged<SchedulerPool>?) {
        let current: Unmanaged<CoroutineScheduler>
        if let p = ccoro_tls_coroutine() {
            current = Unmanaged<Coroutine>.fromOpaque(p)._withUnsafeGuaranteedRef { $0.placement }
        } else if let p = ccoro_tls_scheduler() {
            current = Unmanaged<CoroutineScheduler>.fromOpaque(p)
        } else if isMainThread() {
            return (.passUnretained(.main), nil)
        } else {
            let pool = SchedulerPool.default(for: .default)
            return (.passUnretained(pool.schedulers[0]), .passUnretained(pool))
        }
        return (current, current._withUnsafeGuaranteedRef { $0.poolReference })
    }

    /// Where a coroutine launched with `on: scheduler` is queued first, and its pool if it is a
    /// pool launch (see ``defaultPlacement()``).
    static func placement(for scheduler: CoroutineScheduler?) -> (CoroutineScheduler, SchedulerPool?) {
        if let scheduler { return (scheduler, nil) }
        let (s, pool) = defaultPlacement()
        return (s.takeUnretainedValue(), pool?.takeUnretainedValue())
    }

    /// Whether the calling thread drives this scheduler.
    @inlinable @inline(__always)
    var isOnOwnThread: Bool {
        ccoro_tls_scheduler() == Unmanaged.passUnretained(self).toOpaque()
    }
}
