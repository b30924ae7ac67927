import Dispatch
import QueuePool
import Synchronization

/// A fixed set of schedulers that share their unstarted coroutines: YYKit's
/// `YYDispatchQueuePool` idea applied to thread-pinned schedulers, with Go's work stealing for
/// what has not started yet.
///
/// Each scheduler owns one thread at the pool's QoS, so the pool bounds the number of threads
/// running coroutines without a concurrent queue. ``default(for:)`` returns one shared pool per
/// QoS class with one scheduler per CPU the process may use (affinity mask and cgroup v2 CPU
/// quota; `COROUTINES_SCHEDULERS=N` overrides it).
///
/// ## Pool launches
/// `Coroutine.launch(on: pool)`, `Coroutine.async(on: pool)` and launches without `on:` from a
/// pool scheduler or a plain thread are *pool launches*: queued on the launching scheduler
/// first (or in the pool's shared queue, from outside the pool), and started by whichever
/// scheduler of the pool is free first. An idle scheduler takes about half of a busy peer's
/// unstarted launches (Go's `runqsteal`). A coroutine's thread is fixed when it starts and never
/// changes after: only unstarted launches move. A pool launch may run in parallel with the code
/// that launched it. A launch onto one scheduler (``next()``, ``schedulers``) is never moved. See
/// <doc:PoolsAndStealing>.
///
/// ## Threading
/// All members are thread-safe. The default pools live for the whole process; a pool created
/// with ``init(name:count:qos:)`` runs until ``stop()``. A pool scheduler's own `stop()` is
/// ignored.
public final class SchedulerPool: Sendable {
    /// The pool's schedulers, in round-robin order.
    public let schedulers: [CoroutineScheduler]
    /// The pool's name; its schedulers are named `name.0`, `name.1`, ….
    public let name: String
    private let counter = Atomic<Int>(0)
    /// Whether this is one of the ``default(for:)`` pools, which ``stop()`` leaves running.
    let isDefault: Bool

    // MARK: Stealing (`Stealing/SchedulerPool+Stealing`)

    /// Pool launches made outside the pool's schedulers, and the overflow of their full
    /// ``LaunchQueue``s, oldest first; closed when the pool stops (Go's global run queue).
    let shared = SharedLaunchQueue()
    /// The indices of the schedulers parked with nothing to do (Go's idle P list); guarded by
    /// its lock, counted in `idleCount`.
    let idle = Mutex<[Int]>([])
    /// `idle`'s count, read without its lock.
    let idleCount = Atomic<Int>(0)
    /// Schedulers looking for launches to steal (Go's `nmspinning`).
    let spinning = Atomic<Int>(0)

    /// Creates `count` schedulers, each with its own thread at `qos`.
    ///
    /// - Parameters:
    ///   - name: Prefix of the schedulers' names.
    ///   - count: How many schedulers; must be in `1...1024`.
    ///   - qos: Priority class of the threads.
    /// - Returns: nil unless `count` is in `1...1024`.
    /// - Complexity: starts `count` threads.
    public convenience init?(name: String, count: Int, qos: DispatchQoS.QoSClass = .default) {
        self.init(name: name, count: count, qos: qos, isDefault: false)
    }

    init?(name: String, count: Int, qos: DispatchQoS.QoSClass, isDefault: Bool) {
        guard (1...PoolSize.maximum).contains(count) else { return nil }
        self.name = name
        self.isDefault = isDefault
        schedulers = (0..<count).map { i in
            CoroutineScheduler(name: "\(name).\(i)", qos: qos, kind: .pool, poolIndex: i)
        }
        for s in schedulers {
            s.poolReference = .passUnretained(self)
            s.poolForOtherThreads = self
        }
        for s in schedulers { s.startThread() }
    }

    /// The next scheduler in round-robin order (each returned once per `schedulers.count` calls).
    ///
    /// A launch onto the scheduler returned is never moved to another (it starts there, in launch
    /// order among that scheduler's launches): use it to opt out of stealing.
    /// - Complexity: O(1), one atomic increment. Thread-safe.
    public func next() -> CoroutineScheduler {
        let n = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        return schedulers[Int(UInt(bitPattern: n) % UInt(schedulers.count))]
    }

    /// The shared pool for a QoS class: one instance per class, created on first use, with one
    /// scheduler per CPU the process may use: the CPUs of its affinity mask, limited by the
    /// smallest cgroup v2 `cpu.max` quota of its cgroup and their ancestors (rounded up, at least
    /// 1). `COROUTINES_SCHEDULERS=N`, N in `1...1024`, sizes all five pools instead; another
    /// value is ignored with one line on standard error.
    /// - Complexity: O(1) after the first call. Thread-safe.
    public static func `default`(for qos: DispatchQoS.QoSClass) -> SchedulerPool {
        switch qos {
        case .userInteractive: userInteractivePool
        case .userInitiated: userInitiatedPool
        case .utility: utilityPool
        case .background: backgroundPool
        default: defaultPool
        }
    }

    private static func make(_ qos: DispatchQoS.QoSClass, _ label: String) -> SchedulerPool {
        SchedulerPool(name: "coroutines.\(label)", count: defaultCount, qos: qos, isDefault: true)!
    }
    /// Computed once, so that an invalid `COROUTINES_SCHEDULERS` is reported once.
    private static let defaultCount = PoolSize.defaultCount()
    private static let userInteractivePool = make(.userInteractive, "user-interactive")
    private static let userInitiatedPool = make(.userInitiated, "user-initiated")
    private static let defaultPool = make(.default, "default")
    private static let utilityPool = make(.utility, "utility")
    private static let backgroundPool = make(.background, "background")
}
