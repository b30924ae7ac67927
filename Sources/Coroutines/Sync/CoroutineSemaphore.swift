import Synchronization

/// A counting semaphore for coroutines: `acquire()` suspends the coroutine, never its thread,
/// while no permit is available.
///
/// ```swift
/// let slots = CoroutineSemaphore(permits: 4)
/// try slots.acquire(); defer { slots.release() }   // at most 4 coroutines in here at once
/// ```
///
/// Waiters get permits in FIFO order, handed over directly by `release()` (no barging). A waiting
/// coroutine can be cancelled; if a permit was handed to it first, `acquire()` returns normally
/// and the coroutine holds the permit (see <doc:MutexSemaphoreAndWaitGroup>).
///
/// - Thread-safety: every member is thread-safe. `release()` may be called from any thread; a
///   release without a matching acquire adds a permit (as `DispatchSemaphore.signal()`).
public final class CoroutineSemaphore: Sendable {
    let state: Mutex<CoroutineSemaphoreState>

    /// Creates a semaphore with `permits` permits available.
    /// - Parameter permits: The initial number of permits; must not be negative (a
    ///   precondition failure otherwise).
    public init(permits: Int) {
        precondition(permits >= 0, "CoroutineSemaphore permits must not be negative (got \(permits))")
        state = Mutex(CoroutineSemaphoreState(permits: permits))
    }

    /// Takes a permit, suspending the current coroutine while none is available.
    ///
    /// - Throws: `CancellationError` if the coroutine is cancelled (checked first);
    ///   `CoroutineError.timedOut` inside an expiring `withTimeout`;
    ///   `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: while no permit is available; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) to take or queue; O(1) amortised to withdraw after cancellation (a tombstone in a long queue: see `WaiterList`).
    public func acquire() throws {
        try Coroutine.withCurrent { c in
            try c.wait(.semaphore, register: { ticket in
                state.locked { $0.acquire(ticket) }
            }, unregister: { ticket in
                state.locked { $0.waiters.withdraw(ticket) }
            })
        }
    }

    /// Returns a permit: to the first waiting coroutine, else to the pool.
    /// - Suspends: no; the woken coroutine runs later on its own scheduler. Any thread.
    /// - Complexity: O(1) amortised.
    public func release() {
        state.locked { $0.release() }?.wakeClaimed()
    }

    /// The permits available now (0 while coroutines wait). Any thread; O(1).
    public var availablePermits: Int { state.locked { $0.permits } }
}

/// The state of a ``CoroutineSemaphore``. Invariant: `permits > 0` implies no live waiter.
struct CoroutineSemaphoreState {
    var permits: Int
    var waiters = WaiterList<WaitTicket>()

    /// Takes a permit (returns true) or queues the ticket.
    mutating func acquire(_ ticket: WaitTicket) -> Bool {
        if permits > 0 {
            permits -= 1
            return true
        }
        waiters.append(ticket)
        return false
    }

    /// Hands the permit to the first waiter still waiting (claimed; wake it), or keeps it.
    mutating func release() -> WaitTicket? {
        if let next = waiters.popClaimed() { return next }
        permits += 1
        return nil
    }
}
