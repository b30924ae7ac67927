import CCoroutines
import Foundation

/// A pool of plain threads for blocking work, so that coroutines can wait for it without
/// blocking their schedulers (see ``Coroutine/offload(to:_:)``).
///
/// ```swift
/// let pool = BlockingPool(threadCount: 8)
/// let text = try Coroutine.offload(to: pool) { try String(contentsOfFile: path, encoding: .utf8) }
/// ```
///
/// ## Policy
/// Threads are started lazily, one when a job arrives and no idle thread is waiting. Up to
/// ``threadCount`` threads (default 64) are kept for the life of the pool. When all of them are
/// busy, the pool does not queue the job behind them: it starts a *burst* thread, up to
/// ``maxThreadCount`` threads in all (default 1,024); a burst thread ends after ``idleTimeout``
/// without work. Only beyond ``maxThreadCount`` do jobs wait for a free thread.
///
/// Threads are started by a dedicated starter thread, never by the caller of ``submit(_:)``, so a
/// coroutine's scheduler is not stalled by a burst of thread starts. The starter binds each new
/// thread to the newest waiting job, while free threads take the oldest: a short job submitted
/// behind a burst of slow ones waits for one thread start, not for the whole burst's. Jobs are
/// therefore not started in submission order while a burst is being absorbed.
///
/// Why burst threads rather than a fixed-size FIFO: the pool cannot know which jobs are short. With
/// 64 threads and a FIFO queue, a 1 ms job submitted behind 1,000 jobs of 100 ms each would wait
/// about 1.5 s, while <doc:FoundationWork> promises that a short job never queues behind a crowd of
/// slow ones until the pool has reached its ceiling of threads. Blocking work mostly sleeps in the
/// kernel, so a thread per pending job costs address space for its stack and little else — the
/// choice Go's runtime makes for blocking system calls.
///
/// Releasing a pool lets its threads end: each finishes the jobs still queued, then exits.
/// ``shared`` is never released.
///
/// ## Threading
/// All methods are thread-safe. Pool threads are never scheduler threads: code on them sees
/// `Coroutine.current == nil` and `CoroutineScheduler.current == nil`.
public final class BlockingPool: Sendable {
    /// The pool ``Coroutine/offload(to:_:)`` uses by default: 64 kept threads, at most
    /// 1,024 in all.
    public static let shared = BlockingPool()

    /// Threads the pool keeps once started (they wait for work until the pool is released).
    public let threadCount: Int
    /// The most threads the pool runs at once, kept and burst threads together.
    public let maxThreadCount: Int
    /// How long a thread beyond ``threadCount`` waits for work before it ends.
    public let idleTimeout: Duration

    private let core: Core

    /// Creates a pool; no thread starts until the first job.
    ///
    /// - Parameters:
    ///   - threadCount: Threads kept once started; at least 1 (otherwise a precondition failure).
    ///   - maxThreadCount: The ceiling on threads; `nil` means `max(threadCount, 1024)`. Must not
    ///     be below `threadCount`.
    ///   - idleTimeout: How long a burst thread waits for work before it ends; must be positive.
    /// - Complexity: O(1).
    public init(threadCount: Int = 64, maxThreadCount: Int? = nil, idleTimeout: Duration = .seconds(5)) {
        precondition(threadCount >= 1, "BlockingPool: threadCount must be at least 1, got \(threadCount)")
        let ceiling = maxThreadCount ?? max(threadCount, 1024)
        precondition(ceiling >= threadCount,
                     "BlockingPool: maxThreadCount (\(ceiling)) must not be below threadCount (\(threadCount))")
        precondition(idleTimeout > .zero, "BlockingPool: idleTimeout must be positive")
        self.threadCount = threadCount
        self.maxThreadCount = ceiling
        self.idleTimeout = idleTimeout
        core = Core(keep: threadCount, ceiling: ceiling, idleTimeout: idleTimeout)
    }

    /// Runs `job` on one of the pool's threads, soon; returns at once.
    ///
    /// - Parameter job: The work. It runs outside any coroutine and may block.
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(1) amortised, plus the start of a thread when none is idle.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        core.submit(job)
    }

    /// Threads currently alive in the pool (busy or idle). For tests and diagnostics.
    /// - Complexity: O(1). Thread-safe.
    public var liveThreadCount: Int { core.liveThreads }

    deinit {
        core.close()
    }
}

/// What a new pool thread starts with: its pool and the job it was started for.
private final class ThreadStart: Sendable {
    let core: Core
    let job: @Sendable () -> Void
    init(core: Core, job: @escaping @Sendable () -> Void) {
        self.core = core
        self.job = job
    }
}

/// The pool's shared state; its threads keep it alive.
///
/// Threads are started by a *starter* thread, never by the submitter: starting a thread takes
/// the process's memory-map lock, which other threads (coroutine stacks) contend for, and a
/// scheduler thread submitting a burst must not stall its other coroutines meanwhile. The
/// starter serves the newest queued job first, binding it to the thread it starts, while pool
/// threads take the oldest: so a short job submitted behind a burst of slow ones waits for one
/// thread start, not for the whole burst's.
private final class Core: @unchecked Sendable {
    let keep: Int
    let ceiling: Int
    let idleTimeout: TimeInterval
    /// Guards every field below and is the condition idle pool threads wait on.
    let condition = NSCondition()
    /// Jobs not yet taken; `head` is the index of the oldest. Guarded by `condition`.
    var jobs: [@Sendable () -> Void] = []
    var head = 0
    /// Live threads (counting those being started), and those of them waiting for work.
    var threads = 0
    var idle = 0
    /// The starter thread runs (or has been asked to start) and sleeps on `starterWake`.
    var starterRunning = false
    let starterWake = NSCondition()   // signalled with `condition` held, waited on alone
    var starterPending = false        // guarded by `condition`
    /// The pool was released: idle threads end once the queue is empty. Guarded by `condition`.
    var closing = false

    init(keep: Int, ceiling: Int, idleTimeout: Duration) {
        self.keep = keep
        self.ceiling = ceiling
        let c = idleTimeout.components
        self.idleTimeout = Double(c.seconds) + Double(c.attoseconds) * 1e-18
    }

    var liveThreads: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    var queued: Int { jobs.count - head }

    func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        if idle > 0 { condition.signal() }
        // More queued jobs than idle threads: the starter starts threads for the rest.
        let needStarter = queued > idle && threads < ceiling
        var startStarter = false
        if needStarter {
            if !starterRunning {
                starterRunning = true
                startStarter = true
            }
            starterPending = true
        }
        condition.unlock()
        if needStarter {
            starterWake.lock()
            starterWake.signal()
            starterWake.unlock()
        }
        if startStarter { startStarterThread() }
    }

    /// Lets every thread end once the queue is empty (the pool handle was released).
    func close() {
        condition.lock()
        closing = true
        condition.broadcast()
        condition.unlock()
        starterWake.lock()
        starterWake.signal()
        starterWake.unlock()
    }

    private func startStarterThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        let result = ccoro_thread_start({ context in
            let core = Unmanaged<Core>.fromOpaque(context!).takeRetainedValue()
            ccoro_set_thread_name("blocking-pool-starter")
            core.runStarter()
        }, context)
        precondition(result == 0, "BlockingPool: cannot start its starter thread (error \(result))")
    }

    /// The starter's loop: while more jobs are queued than threads are idle, take the newest job
    /// and start a thread for it.
    private func runStarter() {
        while true {
            condition.lock()
            var job: (@Sendable () -> Void)?
            if queued > idle && threads < ceiling {
                job = jobs.removeLast()
                threads += 1
                if head == jobs.count { jobs.removeAll(keepingCapacity: true); head = 0 }
            } else {
                starterPending = false
            }
            let ending = job == nil && closing
            condition.unlock()
            if let job {
                startThread(first: job)
                continue
            }
            if ending { return }
            starterWake.lock()
            condition.lock()
            let pending = starterPending || closing
            condition.unlock()
            if !pending { starterWake.wait() }
            starterWake.unlock()
        }
    }

    /// Starts a detached pool thread (plain pthread: cheaper to start than `Foundation.Thread`,
    /// which matters when a burst of blocking jobs needs hundreds at once).
    private func startThread(first job: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(ThreadStart(core: self, job: job)).toOpaque()
        let result = ccoro_thread_start({ context in
            let start = Unmanaged<ThreadStart>.fromOpaque(context!).takeRetainedValue()
            ccoro_set_thread_name("blocking-pool")
            start.job()
            start.core.work()
        }, context)
        if result != 0 {
            Unmanaged<ThreadStart>.fromOpaque(context).release()
            condition.lock()
            threads -= 1
            jobs.append(job)          // run by a thread that exists, if any
            if idle > 0 { condition.signal() }
            let stranded = threads == 0
            condition.unlock()
            precondition(!stranded, "BlockingPool: cannot start a thread (error \(result)) and none is running")
        }
    }

    /// A pool thread's loop: take the oldest job, run it, repeat; a thread beyond `keep` ends
    /// after `idleTimeout` without work, and every thread ends once the pool is closed and empty.
    private func work() {
        condition.lock()
        while true {
            if head < jobs.count {
                let job = jobs[head]
                head += 1
                if head == jobs.count { jobs.removeAll(keepingCapacity: true); head = 0 }
                else if head >= 1024 && head * 2 >= jobs.count { jobs.removeFirst(head); head = 0 }
                condition.unlock()
                job()
                condition.lock()
                continue
            }
            if closing { break }
            idle += 1
            if threads > keep {
                let signalled = condition.wait(until: Date(timeIntervalSinceNow: idleTimeout))
                idle -= 1
                if !signalled && head == jobs.count && threads > keep { break }
            } else {
                condition.wait()
                idle -= 1
            }
        }
        threads -= 1
        condition.unlock()
    }
}
