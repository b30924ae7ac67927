import Synchronization
/// The pure state of a promise: pending with waiters, or settled with a result.
///
/// Invariants:
/// * `result == nil` ⇔ pending; once set it never changes (first settlement wins, SPEC §5.1).
/// * `waiters` and `cancelHandlers` are empty once settled: settling hands every waiter to the caller, which resumes
///   them after releasing the lock.
/// * `cancelHandlers` run at most once: they are handed out when the promise is cancelled, and a
///   handler added afterwards is handed back at once to be run.
@usableFromInline
struct PromiseStateMachine<Value: Sendable> {
    /// A waiter that is not a coroutine (coroutines, the hot path, have their own list of plain
    /// tickets so that no multi-payload enum is copied when a coroutine waits).
    @usableFromInline
    enum Waiter {
        /// A Swift task awaiting `value`.
        case continuation(id: UInt64, CheckedContinuation<Value, any Error>)
        /// An observer (`then`, `catch`, …) to run as a job on a scheduler.
        case observer(CoroutineScheduler, @Sendable (Result<Value, any Error>) -> Void)
    }

    /// What a settlement hands back to be resumed outside the lock.
    @usableFromInline
    struct Settled {
        @usableFromInline var coroutines: WaiterList<WaitTicket>
        @usableFromInline var others: [Waiter]
        @inlinable init(coroutines: WaiterList<WaitTicket>, others: [Waiter]) {
            self.coroutines = coroutines
            self.others = others
        }
    }

    @usableFromInline var result: Result<Value, any Error>?
    @usableFromInline var coroutines = WaiterList<WaitTicket>()
    @usableFromInline var others: [Waiter] = []
    @usableFromInline var cancelHandlers = WaiterList<@Sendable () -> Void>()
    @usableFromInline var isCancelled = false
    /// The coroutine of `Coroutine.async` that `cancel()` cancels; dropped once settled.
    @usableFromInline var linkedCoroutine: Coroutine?

    @inlinable
    init() {}

    /// Settles; returns the waiters to resume, or nil if already settled.
    @inlinable
    mutating func settle(_ r: Result<Value, any Error>) -> Settled? {
        guard result == nil else { return nil }
        result = r
        let settled = Settled(coroutines: coroutines, others: others)
        coroutines = WaiterList()
        others = []
        linkedCoroutine = nil
        cancelHandlers = WaiterList()   // never run now; dropping them breaks promise → handler → coroutine cycles
        return settled
    }

    /// Marks cancellation and returns the cancel handlers to run (once).
    @inlinable
    mutating func cancel() -> WaiterList<@Sendable () -> Void> {
        if isCancelled { return WaiterList() }
        isCancelled = true
        let h = cancelHandlers
        cancelHandlers = WaiterList()
        return h
    }

    /// Adds a cancel handler; returns true if it must run now (already cancelled).
    @inlinable
    mutating func addCancelHandler(_ h: @escaping @Sendable () -> Void) -> Bool {
        if isCancelled { return true }
        if result != nil { return false }   // settled otherwise: never cancelled now
        cancelHandlers.append(h)
        return false
    }

    /// Adds a coroutine waiter unless settled; returns true if settled.
    @inlinable
    mutating func add(_ ticket: WaitTicket) -> Bool {
        if result != nil { return true }
        coroutines.append(ticket)
        return false
    }

    /// Adds a task or observer waiter unless settled; returns the result if settled.
    @inlinable
    mutating func add(_ w: Waiter) -> Result<Value, any Error>? {
        if let result { return result }
        others.append(w)
        return nil
    }

    /// Removes a coroutine's waiter (after cancellation or timeout).
    @inlinable
    mutating func remove(_ ticket: WaitTicket) {
        _ = coroutines.remove { $0.matches(ticket) }
    }

    /// Removes and returns a task's waiter.
    @inlinable
    mutating func removeContinuation(id: UInt64) -> CheckedContinuation<Value, any Error>? {
        guard let i = others.firstIndex(where: { if case .continuation(id, _) = $0 { return true } else { return false } }),
              case .continuation(_, let k) = others.remove(at: i) else { return nil }
        return k
    }
}
