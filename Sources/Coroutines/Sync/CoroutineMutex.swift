import Synchronization

/// A mutual-exclusion lock for coroutines: a coroutine waiting for it suspends, never its thread.
///
/// ```swift
/// let mutex = CoroutineMutex()
/// try mutex.withLock { balance += amount }   // may suspend while another coroutine holds it
/// ```
///
/// Waiters get the lock in FIFO order, handed over directly by `unlock()` (no barging). A waiting
/// coroutine can be cancelled; if the lock was handed to it first, `lock()` returns normally and
/// the coroutine owns it (see <doc:MutexSemaphoreAndWaitGroup>). The lock may be held across
/// suspensions (that is its purpose), and the owner may unlock it on any scheduler's coroutine only
/// if it is the owner.
///
/// - Thread-safety: every member is thread-safe. Unlocking from a coroutine that does not hold
///   the lock is a precondition failure; locking it again from its owner throws
///   `CoroutineError.recursiveLock`.
public final class CoroutineMutex: Sendable {
    let state = Mutex(CoroutineMutexState())

    /// Creates an unlocked mutex.
    public init() {}

    /// Takes the lock, suspending the current coroutine while another coroutine holds it.
    ///
    /// - Throws: `CoroutineError.recursiveLock` if the current coroutine already holds it;
    ///   `CancellationError` if the coroutine is cancelled (checked first);
    ///   `CoroutineError.timedOut` inside an expiring `withTimeout`;
    ///   `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: while the lock is held; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) to take or queue; O(1) amortised to withdraw after cancellation (a tombstone in a long queue: see `WaiterList`).
    public func lock() throws {
        try Coroutine.withCurrent { c in
            try c.wait(.mutex, register: { ticket in
                try state.locked { try $0.lock(ticket) }
            }, unregister: { ticket in
                state.locked { $0.withdraw(ticket) }
            })
        }
    }

    /// Releases the lock, handing it to the first waiting coroutine.
    ///
    /// Must be called by the coroutine that holds the lock (a precondition failure otherwise).
    /// - Suspends: no; the next owner runs later on its own scheduler.
    /// - Complexity: O(1) amortised.
    public func unlock() {
        let caller = Coroutine.current
        let next = state.locked { $0.unlock(by: caller) }
        next?.wakeClaimed()
    }

    /// Runs `body` while holding the lock.
    ///
    /// - Parameter body: The critical section; it may suspend.
    /// - Returns: The body's value.
    /// - Throws: What ``lock()`` or the body throws (the lock is released either way).
    /// - Suspends: in ``lock()`` and wherever the body does.
    public func withLock<T>(_ body: () throws -> T) throws -> T {
        try lock()
        defer { unlock() }
        return try body()
    }
}

/// The state of a ``CoroutineMutex``: its owner and FIFO waiters. Guarded by the mutex's lock.
struct CoroutineMutexState {
    var owner: Coroutine?
    var waiters = WaiterList<WaitTicket>()

    /// Takes the lock for the ticket's coroutine if free (returns true), else queues it.
    mutating func lock(_ ticket: WaitTicket) throws -> Bool {
        if owner === ticket.coroutine { throw CoroutineError.recursiveLock }
        guard owner == nil else {
            waiters.append(ticket)
            return false
        }
        owner = ticket.coroutine
        return true
    }

    /// Releases the lock and hands it to the first waiter still waiting (claimed; wake it).
    mutating func unlock(by caller: Coroutine?) -> WaitTicket? {
        precondition(owner != nil && owner === caller,
                     "CoroutineMutex.unlock() called by \(caller.map { "\($0)" } ?? "code outside a coroutine"), which does not hold the lock")
        let next = waiters.popClaimed()
        owner = next?.coroutine
        return next
    }

    mutating func withdraw(_ ticket: WaitTicket) {
        waiters.withdraw(ticket)
    }
}
