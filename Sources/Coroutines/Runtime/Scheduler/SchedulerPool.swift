import Dispatch
import QueuePool
import Synchronization

/// A fixed set of schedulers handed out round-robin: YYKit's `YYDispatchQueuePool` idea applied
/// to thread-pinned schedulers.
///
/// Each scheduler owns one thread at the pool's QoS, so the pool bounds the number of threads
/// running coroutines without a concurrent queue. ``default(for:)`` returns one shared pool per
/// QoS class with one scheduler per CPU the process may use (affinity mask and cgroup v2 CPU
/// quota; `COROUTINES_SCHEDULERS=N` overrides it).
///
/// ## Threading
/// All members are thread-safe. Pool schedulers live for the whole process: their `stop()` is
/// ignored.
public final class SchedulerPool: Sendable {
    /// The pool's schedulers, in round-robin order.
    public let schedulers: [CoroutineScheduler]
    /// The pool's name; its schedulers are named `name.0`, `name.1`, ….
    public let name: String
    private let counter = Atomic<Int>(0)

    /// Creates `count` schedulers, each with its own thread at `qos`.
    ///
    /// - Parameters:
    ///   - name: Prefix of the schedulers' names.
    ///   - count: How many schedulers; must be in `1...1024`.
    ///   - qos: Priority class of the threads.
    /// - Returns: nil unless `count` is in `1...1024`.
    /// - Complexity: starts `count` threads.
    public init?(name: String, count: Int, qos: DispatchQoS.QoSClass = .default) {
        guard (1...PoolSize.maximum).contains(count) else { return nil }
        self.name = name
        schedulers = (0..<count).map { i in
            let s = CoroutineScheduler(name: "\(name).\(i)", qos: qos, kind: .pool)
            s.startThread()
            return s
        }
    }

    /// The next scheduler in round-robin order (each returned once per `schedulers.count` calls).
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
        SchedulerPool(name: "coroutines.\(label)", count: defaultCount, qos: qos)!
    }
    /// Computed once, so that an invalid `COROUTINES_SCHEDULERS` is reported once.
    private static let defaultCount = PoolSize.defaultCount()
    private static let userInteractivePool = make(.userInteractive, "user-interactive")
    private static let userInitiatedPool = make(.userInitiated, "user-initiated")
    private static let defaultPool = make(.default, "default")
    private static let utilityPool = make(.utility, "utility")
    private static let backgroundPool = make(.background, "background")
}
