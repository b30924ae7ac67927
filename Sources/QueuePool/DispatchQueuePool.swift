import Dispatch
import Synchronization

/// A fixed set of serial dispatch queues that hands them out in turn.
///
/// Creating a dispatch queue for every small job, or sending every job to one global concurrent
/// queue, lets libdispatch start far more threads than there are processors when jobs block. A
/// pool bounds that: it owns ``queueCount`` serial queues, all with the pool's quality-of-service
/// class, and ``next()`` returns them round-robin, so work spreads over at most ``queueCount``
/// threads at a time. Work submitted to one queue runs serially, in submission order.
///
/// Use ``default(for:)`` or ``queue(for:)`` for one shared pool per quality-of-service class, sized
/// to the processors the process may use; create your own pool to isolate a subsystem.
///
/// ```swift
/// // One queue of the shared utility pool.
/// DispatchQueuePool.queue(for: .utility).async { compressThumbnail() }
///
/// // A private pool of four queues.
/// let pool = DispatchQueuePool(label: "com.example.decoder", queueCount: 4)!
/// pool.next().async { decode(frame) }
/// ```
///
/// The idea comes from YYKit's `YYDispatchQueuePool` (ibireme), which keeps a pool of serial queues
/// per quality-of-service class and picks one with an atomically incremented counter.
///
/// Nothing in this type suspends a coroutine: it is plain Dispatch, and ``next()`` never blocks.
///
/// ## Threading
///
/// `DispatchQueuePool` is `Sendable` and every member may be used from any thread at the same time.
/// Its queues and properties never change after initialization; the only mutable state is the
/// round-robin counter, an `Atomic<Int>`. The pool never releases its queues while it is alive,
/// and the shared pools of ``default(for:)`` live for the whole process.
public final class DispatchQueuePool: Sendable {
    /// The largest number of queues a pool may own.
    private static let maximumQueueCount = 32

    /// The label the pool was created with; every queue's label begins with it.
    ///
    /// The queue at index `i` of ``queues`` is labelled `"\(label).\(i)"`.
    ///
    /// - Complexity: O(1).
    public let label: String

    /// The quality-of-service class of every queue in the pool.
    ///
    /// This is the class the pool was created with. libdispatch may run a queue at a nearby class
    /// where the kernel lacks that level: without kernel QoS support (on Linux, for instance) a
    /// `.userInteractive` queue reports and runs at `.userInitiated`.
    ///
    /// - Complexity: O(1).
    public let qos: DispatchQoS.QoSClass

    /// The pool's serial queues, in the order ``next()`` returns them.
    ///
    /// The array never changes after initialization.
    ///
    /// - Complexity: O(1).
    public let queues: [DispatchQueue]

    /// The number of queues in the pool, between 1 and 32.
    ///
    /// - Complexity: O(1).
    public var queueCount: Int {
        queues.count
    }

    /// The number of calls to ``next()`` so far, wrapping on overflow.
    private let counter = Atomic<Int>(0)

    /// Creates a pool of serial queues, or returns `nil` if `queueCount` is outside `1...32`.
    ///
    /// The queues are created immediately, labelled `"\(label).0"`, `"\(label).1"`, …, and all
    /// use `qos`.
    ///
    /// ```swift
    /// guard let pool = DispatchQueuePool(label: "com.example.io", queueCount: 2, qos: .utility) else {
    ///     preconditionFailure("queueCount is a constant in 1...32")
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - label: The prefix of every queue's label, shown in debuggers and crash reports. Prefer
    ///     reverse-DNS style, such as `"com.example.decoder"`.
    ///   - queueCount: The number of serial queues, from 1 to 32.
    ///   - qos: The quality-of-service class of every queue. The default is `.default`.
    /// - Returns: `nil` if `queueCount` is less than 1 or greater than 32.
    /// - Complexity: O(`queueCount`).
    public init?(label: String, queueCount: Int, qos: DispatchQoS.QoSClass = .default) {
        guard (1...Self.maximumQueueCount).contains(queueCount) else {
            return nil
        }
        let serviceClass = DispatchQoS(qosClass: qos, relativePriority: 0)
        self.label = label
        self.qos = qos
        self.queues = (0..<queueCount).map { index in
            DispatchQueue(label: "\(label).\(index)", qos: serviceClass)
        }
    }

    /// Returns the pool's next queue in round-robin order.
    ///
    /// Calls return `queues[0]`, `queues[1]`, …, `queues[queueCount - 1]`, `queues[0]`, and so on.
    /// The position is claimed with one atomic increment, so any `queueCount` consecutive calls —
    /// from any number of threads — return every queue exactly once.
    ///
    /// ```swift
    /// let queue = pool.next()
    /// queue.async { work() }
    /// ```
    ///
    /// It does not block and does not suspend.
    ///
    /// - Returns: One of ``queues``.
    /// - Complexity: O(1); one relaxed atomic add.
    public func next() -> DispatchQueue {
        let ticket = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        // Read the ticket as unsigned so that the index stays non-negative after the counter wraps.
        let index = Int(UInt(bitPattern: ticket) % UInt(queues.count))
        return queues[index]
    }

    /// Returns the process-wide pool for a quality-of-service class.
    ///
    /// Every call with the same class returns the same instance. Each shared pool is created on
    /// first use, thread-safely, with `min(max(activeProcessorCount, 1), 32)` queues, where the
    /// processor count honours the process's CPU affinity. Its label is
    /// `"com.swift-coroutines.queuepool."` followed by the class name, such as
    /// `"com.swift-coroutines.queuepool.utility"`.
    ///
    /// ```swift
    /// let pool = DispatchQueuePool.default(for: .userInitiated)
    /// pool.next().async { prepareScreen() }
    /// ```
    ///
    /// It does not suspend. The first call for a class may block briefly while another thread
    /// creates that pool.
    ///
    /// - Parameters:
    ///   - qos: The quality-of-service class of the pool's queues. A class unknown to this version
    ///     of the library gets the `.default` pool.
    /// - Returns: The shared pool whose ``qos`` is `qos`.
    /// - Complexity: O(1) after the pool exists; its creation is O(processor count).
    public static func `default`(for qos: DispatchQoS.QoSClass) -> DispatchQueuePool {
        switch qos {
        case .background: SharedPools.background
        case .utility: SharedPools.utility
        case .default: SharedPools.default
        case .userInitiated: SharedPools.userInitiated
        case .userInteractive: SharedPools.userInteractive
        case .unspecified: SharedPools.unspecified
        @unknown default: SharedPools.default
        }
    }

    /// Returns the next queue of the process-wide pool for a quality-of-service class.
    ///
    /// This is `DispatchQueuePool.default(for: qos).next()`: consecutive calls with one class spread
    /// work round-robin over that pool's serial queues.
    ///
    /// ```swift
    /// DispatchQueuePool.queue(for: .background).async { pruneCache() }
    /// ```
    ///
    /// It does not suspend.
    ///
    /// - Parameters:
    ///   - qos: The quality-of-service class of the returned queue.
    /// - Returns: A serial queue of ``default(for:)``.
    /// - Complexity: O(1) after the pool exists.
    public static func queue(for qos: DispatchQoS.QoSClass) -> DispatchQueue {
        self.default(for: qos).next()
    }
}

/// The shared pools of `DispatchQueuePool.default(for:)`, one per quality-of-service class.
///
/// Each is a global constant: Swift initializes it lazily and exactly once, even when several
/// threads ask for it at the same time.
private enum SharedPools {
    static let background = makePool(.background, named: "background")
    static let utility = makePool(.utility, named: "utility")
    static let `default` = makePool(.default, named: "default")
    static let userInitiated = makePool(.userInitiated, named: "userInitiated")
    static let userInteractive = makePool(.userInteractive, named: "userInteractive")
    static let unspecified = makePool(.unspecified, named: "unspecified")

    private static func makePool(_ qos: DispatchQoS.QoSClass, named name: String) -> DispatchQueuePool {
        let queueCount = min(max(activeProcessorCount(), 1), 32)
        guard let pool = DispatchQueuePool(label: "com.swift-coroutines.queuepool.\(name)", queueCount: queueCount, qos: qos) else {
            preconditionFailure("internal inconsistency: shared pool size \(queueCount) is outside 1...32")
        }
        return pool
    }
}
