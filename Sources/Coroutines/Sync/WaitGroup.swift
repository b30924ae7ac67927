import Synchronization

/// Waits for a collection of tasks to finish (Go's `sync.WaitGroup`), suspending the coroutine,
/// never its thread.
///
/// ```swift
/// let group = WaitGroup()
/// for url in urls {
///     group.add()
///     Coroutine.launch { defer { group.done() }; fetch(url) }
/// }
/// try group.wait()        // suspends until every `done()`
/// ```
///
/// - Thread-safety: every member is thread-safe. A counter that goes below zero is a
///   precondition failure (as in Go).
public final class WaitGroup: Sendable {
    let state = Mutex(WaitGroupState())

    /// Creates a wait group with a counter of zero.
    public init() {}

    /// Adds `n` (which may be negative) to the counter; when it reaches zero, every waiting
    /// coroutine is woken.
    /// - Parameter n: The number of tasks to add (default 1).
    /// - Suspends: no. Any thread. - Complexity: O(waiters woken).
    public func add(_ n: Int = 1) {
        let woken = state.locked { $0.add(n) }
        woken.forEach { $0.resume() }
    }

    /// Marks one task done: `add(-1)`.
    /// - Suspends: no. Any thread. Complexity: O(waiters woken). A count below zero is a
    ///   precondition failure.
    public func done() { add(-1) }

    /// Suspends the current coroutine until the counter is zero (returns at once if it is).
    ///
    /// - Throws: `CancellationError` if the coroutine is cancelled (checked first);
    ///   `CoroutineError.timedOut` inside an expiring `withTimeout`;
    ///   `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: while the counter is above zero; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) to register; O(1) amortised to withdraw after cancellation (a tombstone in a long queue: see `WaiterList`).
    public func wait() throws {
        try Coroutine.withCurrent { c in
            try c.wait(.waitGroup, register: { ticket in
                state.locked { s in
                    if s.count == 0 { return true }
                    s.waiters.append(ticket)
                    return false
                }
            }, unregister: { ticket in
                state.locked { $0.waiters.withdraw(ticket) }
            })
        }
    }

    /// The counter now. Any thread; O(1).
    public var count: Int { state.locked { $0.count } }
}

/// The state of a ``WaitGroup``. Invariant: waiters are queued only while `count > 0`.
struct WaitGroupState {
    var count = 0
    var waiters = WaiterList<WaitTicket>()

    /// Adds to the counter; at zero, returns the waiters to wake.
    mutating func add(_ n: Int) -> WaiterList<WaitTicket> {
        count += n
        precondition(count >= 0, "WaitGroup counter went below zero (done() called more often than add())")
        guard count == 0 else { return WaiterList() }
        let woken = waiters
        waiters = WaiterList()
        return woken
    }
}
