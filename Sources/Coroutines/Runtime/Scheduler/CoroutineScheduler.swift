import CCoroutines
import Dispatch
import QueuePool
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
/// thread (SPEC §2.1). Wake-ups from other threads go through a lock-protected queue and one
/// coalesced wake-up of the poller. Every method of this type is thread-safe.
///
/// ## Kinds
/// * `CoroutineScheduler(name:qos:)` starts a dedicated thread that runs until ``stop()``.
/// * ``main`` is the main thread; it runs while the main thread drives it (``run()``, or
///   `Coroutine.runBlocking` on the main thread), and also runs blocks submitted to
///   `DispatchQueue.main` meanwhile (Linux).
/// * Schedulers of a ``SchedulerPool`` live for the whole process.
/// * `Coroutine.runBlocking` turns the calling thread into a temporary scheduler.
public final class CoroutineScheduler: @unchecked Sendable {
    enum Kind { case dedicated, main, pool, temporary }

    /// The scheduler's name (also its thread's name).
    public let name: String
    /// The quality-of-service class the scheduler's thread runs at.
    public let qos: DispatchQoS.QoSClass
    let kind: Kind

    // MARK: Confined to the driving thread

    /// Ready coroutines, FIFO.
    @exclusivity(unchecked) var runQueue = CoroutineQueue(capacity: 64)
    /// `Coroutine.async` launches whose coroutine is not created yet, FIFO; each is matched by
    /// a ``launchMarker`` in `runQueue` (see ``PendingLaunch``).
    @exclusivity(unchecked) var pendingLaunches = PendingLaunchQueue(capacity: 64)
    /// Coroutines reaped since the heap was last tidied (``tidyHeapIfNeeded()``).
    @exclusivity(unchecked) var reapedSinceHeapTidy = 0
    /// Jobs to run on the loop's own stack (observers, timer bookkeeping), FIFO.
    @exclusivity(unchecked) var jobs = RingBuffer<() -> Void>(capacity: 16)
    @exclusivity(unchecked) var timers = TimerHeap()
    @exclusivity(unchecked) var ioWaiters: [Int32: IOWaiters] = [:]
    /// Edge-triggered registrations of ``PollDescriptor``s (sockets) and their waiters.
    @exclusivity(unchecked) var pollTable = PollTable()
    /// A coroutine that finished and switched back to the loop; its stack is released by the loop.
    @exclusivity(unchecked) var finishedCoroutine: Unmanaged<Coroutine>?
    /// Consecutive idle spins that found no work (see `spinMissLimit`).
    @exclusivity(unchecked) private var spinMisses = 0
    /// How many more direct coroutine-to-coroutine switches before the loop gets a turn.
    @exclusivity(unchecked) var directBudget = 0
    /// Default-size stacks kept by this scheduler (taken and given back without a lock).
    @exclusivity(unchecked) var stackCache: [UnsafeMutablePointer<ccoro_stack_record>] = []
    /// `stackCache.count` for readers on other threads (``StackAllocator/stacksInUse``). Only
    /// the scheduler's thread writes it, with plain stores: no read-modify-write per coroutine.
    let cachedStacks = Atomic<Int>(0)
    /// `pendingLaunches.count` for `dumpAll()` on other threads; plain stores by this thread.
    let pendingLaunchCount = Atomic<Int>(0)
    /// State of the scheduler's random generator (SplitMix64), used by `select`.
    @exclusivity(unchecked) var randomState: UInt64 = {
        var g = SystemRandomNumberGenerator()
        return g.next()
    }()
    /// The loop's own context (the thread's stack).
    let loopRecord: UnsafeMutablePointer<ccoro_stack_record>
    @exclusivity(unchecked) private var stopHandled = false
    /// How many times ``cancelAll()`` ran on this thread (see ``PendingLaunch``).
    @exclusivity(unchecked) var cancelAllCount = 0
    @exclusivity(unchecked) private var mainQueueFD: Int32 = -1

    // MARK: Any thread

    let poller = Poller()
    private let incoming = Mutex(Incoming())
    private let incomingCount = Atomic<Int>(0)
    private let parked = Atomic<Bool>(false)
    let stopRequested = Atomic<Bool>(false)
    /// Guards `registryState`. A spin lock: registering and unregistering only move links, and
    /// the owner thread takes it for every coroutine it starts and reaps (see ``SpinLock``).
    let registryLock = SpinLock()
    /// Read and written only inside ``withRegistry(_:)``. Any thread.
    @exclusivity(unchecked) var registryState = Registry()

    /// Runs `body` with the registry, holding `registryLock`. Never suspend or call user code
    /// inside. (As `Coroutine.withShared`: the state is touched only after `lock()`.)
    @inline(__always)
    func withRegistry<R>(_ body: (inout Registry) throws -> R) rethrows -> R {
        registryLock.lock()
        defer { registryLock.unlock() }
        return try body(&registryState)
    }

    struct Incoming {
        var items: [Runnable] = []
        var closed = false
    }

    struct Registry {
        var head: Unmanaged<Coroutine>?
        var count = 0
    }

    /// The coroutines waiting for one descriptor. Readiness wakes every waiter of that kind
    /// (it is level-triggered: all of them may proceed and re-check).
    struct IOWaiters {
        var readers: [WaitTicket] = []
        var writers: [WaitTicket] = []
        var isEmpty: Bool { readers.isEmpty && writers.isEmpty }
    }

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

    init(name: String, qos: DispatchQoS.QoSClass, kind: Kind) {
        self.name = name
        self.qos = qos
        self.kind = kind
        loopRecord = .allocate(capacity: 1)
        loopRecord.initialize(to: ccoro_stack_record())
        SchedulerDirectory.shared.add(self)
    }

    deinit {
        runQueue.deallocate()
        pendingLaunches.deallocate()
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

    /// The default scheduler for `launch(on: nil)` (SPEC §4.2).
    @usableFromInline
    static func defaultForLaunch() -> CoroutineScheduler {
        defaultForLaunchUnretained().takeUnretainedValue()
    }

    /// ``defaultForLaunch()`` without a reference: every scheduler it can return outlives the
    /// call (the running coroutine's, the one this thread drives, `main`, a pool's).
    @usableFromInline
    static func defaultForLaunchUnretained() -> Unmanaged<CoroutineScheduler> {
        if let p = ccoro_tls_coroutine() {
            return Unmanaged<Coroutine>.fromOpaque(p)._withUnsafeGuaranteedRef { .passUnretained($0.scheduler) }
        }
        if let p = ccoro_tls_scheduler() { return Unmanaged<CoroutineScheduler>.fromOpaque(p) }
        if isMainThread() { return .passUnretained(.main) }
        return .passUnretained(SchedulerPool.default(for: .default).next())
    }

    @inline(__always)
    var isOnOwnThread: Bool {
        ccoro_tls_scheduler() == Unmanaged.passUnretained(self).toOpaque()
    }

    // MARK: Running and stopping

    /// Drives the main scheduler on the main thread until ``stop()`` is called.
    ///
    /// Runs coroutines launched onto ``main`` and blocks submitted to `DispatchQueue.main`.
    /// After it returns, the main scheduler can be driven again.
    ///
    /// - Precondition: called on ``main``, on the main thread, not from a coroutine.
    /// - Suspends: no; it blocks the main thread until stopped.
    @available(*, noasync, message: "run() blocks the main thread")
    public func run() {
        precondition(kind == .main, "run() drives CoroutineScheduler.main only; other schedulers run on their own thread")
        precondition(isMainThread(), "CoroutineScheduler.main.run() must be called on the main thread")
        precondition(ccoro_tls_scheduler() == nil, "run() called while the main thread already drives a scheduler")
        drive { self.stopRequested.load(ordering: .sequentiallyConsistent) && self.liveCount == 0 }
        endMainRun()
    }

    /// Makes the main scheduler drivable again after `run()` or a `runBlocking` on main.
    func endMainRun() {
        stopRequested.store(false, ordering: .sequentiallyConsistent)
        stopHandled = false
    }

    /// Cancels and unwinds the scheduler's coroutines, then ends its thread (for ``main``: makes
    /// ``run()`` return once its coroutines have finished).
    ///
    /// A later launch onto a stopped dedicated scheduler never runs and finishes with
    /// `CoroutineError.schedulerStopped`. Schedulers of a ``SchedulerPool`` cannot be stopped:
    /// the call is ignored. On ``main`` it ends the current ``run()`` (or `runBlocking` on the
    /// main thread) — coroutines launched onto main until then are cancelled too — and is
    /// ignored while nothing drives main.
    ///
    /// - Suspends: no; returns at once (the unwinding happens on the scheduler's thread).
    ///   Thread-safe and idempotent.
    public func stop() {
        guard kind != .pool else { return }
        // main: a stop ends the current run; with nothing driving main there is nothing to end.
        if kind == .main && !isDriven.load(ordering: .sequentiallyConsistent) { return }
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        wakeLoop()
    }

    /// Whether a thread drives this scheduler right now.
    let isDriven = Atomic<Bool>(false)

    /// Whether a dedicated (or temporary) scheduler has stopped for good: its thread has ended and
    /// no coroutine can run on it. Always false for ``main`` (which can be driven again) and for
    /// pool schedulers (which never stop).
    public var isStopped: Bool { incoming.locked { $0.closed } }

    var liveCount: Int { withRegistry { $0.count } }

    // MARK: Admission and wake-ups

    /// Links `entry` into the registry, which keeps its reference (+1).
    func register(_ entry: Unmanaged<Coroutine>) {
        withRegistry { r in
            entry._withUnsafeGuaranteedRef { $0.registryNext = r.head }
            r.head?._withUnsafeGuaranteedRef { $0.registryPrevious = entry }
            r.head = entry
            r.count += 1
        }
    }

    /// Removes `c` from the registry and gives back the registry's reference (often the last
    /// one). The caller must own a reference of its own to `c` for the duration of the call.
    func unregister(_ c: Coroutine) {
        if unlink(c) { Unmanaged.passUnretained(c).release() }
    }

    /// Removes `c` from the registry, keeping the registry's reference for the caller to give
    /// back. Returns false if `c` was not linked (then there is no reference to give back).
    func unlink(_ c: Coroutine) -> Bool {
        withRegistry { r in
            let (previous, next) = (c.registryPrevious, c.registryNext)
            guard previous != nil || r.head?.toOpaque() == Unmanaged.passUnretained(c).toOpaque() else { return false }
            if let previous { previous._withUnsafeGuaranteedRef { $0.registryNext = next } } else { r.head = next }
            next?._withUnsafeGuaranteedRef { $0.registryPrevious = previous }
            c.registryNext = nil
            c.registryPrevious = nil
            r.count -= 1
            return true
        }
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

    func wakeLoop() {
        // Not parked: the loop looks at the queue and the flags before it parks again.
        if parked.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent).exchanged {
            poller.wake()
        }
    }

    private func drainIncoming() {
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

    // MARK: The loop

    /// Drives the scheduler on the calling thread until `done()` holds with nothing left to run.
    func drive(until done: () -> Bool) {
        let previous = ccoro_tls_scheduler()
        ccoro_tls_set_scheduler(Unmanaged.passUnretained(self).toOpaque())
        isDriven.store(true, ordering: .sequentiallyConsistent)
        defer {
            isDriven.store(false, ordering: .sequentiallyConsistent)
            ccoro_tls_set_scheduler(previous)
        }
        ccoro_signal_prepare_thread()
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
                job()
                pendingJobs -= 1
            }
            var budget = 128
            while budget > 0, let u = popRunnable() {
                resumeFromLoop(u)
                budget -= 1
            }
            if stopRequested.load(ordering: .sequentiallyConsistent) && !stopHandled {
                // Handled even while coroutines keep the run queue busy (e.g. yield loops).
                stopHandled = true
                cancelAll()
                continue
            }
            if !runQueue.isEmpty || !jobs.isEmpty {
                if !ioWaiters.isEmpty || pollTable.waiterCount > 0 || mainQueueFD >= 0 { poll(timeout: 0) }
                continue
            }
            if done() { break }
            if !runQueue.isEmpty || !jobs.isEmpty { continue }
            // A peer on another thread often answers within microseconds (a channel hand-off):
            // spinning briefly avoids the kernel round trip of parking and being woken. Only
            // while it pays off, though (see `spinMisses`).
            let spun = spinMisses < Self.spinMissLimit
            if spun {
                if spinForIncoming() { spinMisses = 0; continue }
                spinMisses += 1
            }
            StackAllocator.shared.trimIfNeeded()
            tidyHeapIfNeeded()
            parked.store(true, ordering: .sequentiallyConsistent)
            // Re-checked after announcing the park (each writer changes its condition, then
            // wakes a parked loop): posted work, a stop request, or — a launch racing with stop
            // finishes its coroutine on the launching thread — nothing left to wait for.
            if incomingCount.load(ordering: .sequentiallyConsistent) > 0
                || (stopRequested.load(ordering: .sequentiallyConsistent) && !stopHandled)
                || done() {
                parked.store(false, ordering: .sequentiallyConsistent)
                continue
            }
            var timeout: UInt64? = nil
            if let deadline = timers.nextDeadline {
                let now = ccoro_now_ns()
                timeout = deadline > now ? deadline - now : 0
            }
            let parkedAt = spun ? 0 : ccoro_now_ns()
            poll(timeout: timeout)
            parked.store(false, ordering: .sequentiallyConsistent)
            if !spun, incomingCount.load(ordering: .relaxed) > 0,
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
            if incomingCount.load(ordering: .relaxed) > 0
                || (stopRequested.load(ordering: .relaxed) && !stopHandled) { return true }
            ccoro_cpu_relax()
            i += 1
            if i & 63 == 0 && ccoro_now_ns() >= deadline { return false }
        }
    }

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

    private func prepareLoopRecord() {
        loopRecord.pointee.fiber = ccoro_fiber_current()
        var base: UnsafeMutableRawPointer?
        var size = 0
        ccoro_thread_stack_bounds(&base, &size)
        loopRecord.pointee.stack.base = base
        loopRecord.pointee.stack.size = size
    }

    private func runDueTimers() {
        guard timers.count > 0 else { return }
        let now = ccoro_now_ns()
        while let t = timers.popDue(now: now) {
            let action = t.action
            t.action = nil
            action?()
        }
    }

    private func poll(timeout: UInt64?) {
        let n = poller.wait(timeoutNanoseconds: timeout)
        for i in 0..<n {
            let ev = poller.events[i]
            if PollTable.isTagged(ev.data) {
                pollTable.deliver(datum: ev.data, readable: ev.readable != 0, writable: ev.writable != 0)
                continue
            }
            let fd = Int32(truncatingIfNeeded: ev.data)
            if fd == mainQueueFD {
                var value: UInt64 = 0
                _ = read(mainQueueFD, &value, 8)
                ccoro_dispatch_main_queue_drain()
                continue
            }
            guard var w = ioWaiters[fd] else { continue }
            var woken: [WaitTicket] = []
            if ev.readable != 0 { woken += w.readers; w.readers = [] }
            if ev.writable != 0 { woken += w.writers; w.writers = [] }
            if w.isEmpty {
                ioWaiters[fd] = nil
            } else {
                ioWaiters[fd] = w
                _ = poller.arm(fd: fd, readable: !w.readers.isEmpty, writable: !w.writers.isEmpty)
            }
            for t in woken { t.resume() }
        }
    }

    /// Cancels every live coroutine of this scheduler (stop, runBlocking's error path).
    func cancelAll() {
        // Pending launches have no coroutine yet: they see the count move when created. Off this
        // scheduler's thread (a job of a stopped scheduler, run on a pool scheduler) none is left.
        if isOnOwnThread { cancelAllCount &+= 1 }
        for c in liveCoroutines() { c.cancel() }
    }

    /// The coroutines in the registry (admitted and not yet finished), newest first, retained so
    /// that they can be used after the registry's lock is released. Any thread.
    /// - Complexity: O(live coroutines).
    func liveCoroutines() -> [Coroutine] {
        withRegistry { r in
            var all: [Coroutine] = []
            all.reserveCapacity(r.count)
            var c = r.head
            while let x = c {
                all.append(x.takeUnretainedValue())
                c = x._withUnsafeGuaranteedRef { $0.registryNext }
            }
            return all
        }
    }

    /// Closes the incoming queue after the loop ended; leftovers finish as stopped.
    func close() {
        SchedulerDirectory.shared.remove(self)
        let leftovers = incoming.locked { s in
            s.closed = true
            let items = s.items
            s.items = []
            return items
        }
        incomingCount.store(0, ordering: .sequentiallyConsistent)
        for item in leftovers + drainRunQueue() {
            switch item {
            case .job(let job): job()   // observers and timer bookkeeping: run them here, once
            case .coroutine(let c): c.finishUnstarted(CoroutineError.schedulerStopped)
            }
        }
        cachedStacks.store(0, ordering: .releasing)
        for r in stackCache { StackAllocator.shared.give(r) }
        stackCache = []
        // Timers of a stopped scheduler can never fire here. Those armed for other code
        // (`Promise.timeout`, `cancel(after:)`) move to a pool scheduler with the same deadline;
        // the rest belonged to coroutines, which have all finished.
        while let t = timers.popDue(now: .max) {
            if let portable = t.portableAction {
                SchedulerPool.default(for: .default).next().scheduleTimer(deadline: t.deadline, portable)
            }
            t.action = nil
            t.portableAction = nil
        }
    }
}

/// An entry of a run queue: a coroutine to resume, or a job to run on the loop's own stack.
///
/// `@unchecked Sendable`: a job is created for and only run on its scheduler's thread; it crosses
/// threads only through the incoming queue's lock.
enum Runnable: @unchecked Sendable {
    case coroutine(Coroutine)
    case job(() -> Void)
}

/// Whether the calling thread is the process's main thread.
func isMainThread() -> Bool {
    #if canImport(Glibc)
    return UInt64(getpid()) == ccoro_thread_id()
    #else
    return pthread_main_np() != 0
    #endif
}
