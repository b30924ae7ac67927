import Synchronization

/// A promise's settlement with the value's type erased, so that the promise's state — and thus
/// releasing a `Promise<Value>` — involves no generic type built from `Value` (the runtime would
/// look its metadata up in a hash table on every release).
@usableFromInline
enum PromiseOutcome: @unchecked Sendable {   // the erased values are Sendable `Value`s
    case fulfilled(ErasedValue)
    case rejected(any Error)

    /// The settlement typed back (the caller knows `Value`).
    @inlinable
    func result<Value>(as _: Value.Type) -> Result<Value, any Error> {
        switch self {
        case .fulfilled(let v): .success(v.value(as: Value.self))
        case .rejected(let e): .failure(e)
        }
    }

    @inlinable
    init<Value>(_ r: Result<Value, any Error>) {
        switch r {
        case .success(let v): self = .fulfilled(ErasedValue(v))
        case .failure(let e): self = .rejected(e)
        }
    }
}

/// A value of a type known only to the code that stored it: its bytes inline when it is a small
/// plain-old-data type (`Int`, `Void`, small structs of such), else a box.
@usableFromInline
struct ErasedValue {
    @usableFromInline var bits: (UInt64, UInt64) = (0, 0)
    @usableFromInline var box: AnyObject?

    @inlinable
    init<Value>(_ v: Value) {
        if Self.storesInline(Value.self) {
            withUnsafeMutableBytes(of: &bits) { $0.storeBytes(of: v, as: Value.self) }
        } else {
            box = ValueBox(v)
        }
    }

    @inlinable
    static func storesInline<Value>(_: Value.Type) -> Bool {
        _isPOD(Value.self) && MemoryLayout<Value>.size <= 16 && MemoryLayout<Value>.alignment <= 8
    }

    /// The value; `Value` must be the type it was stored with.
    @inlinable
    func value<Value>(as _: Value.Type) -> Value {
        if Self.storesInline(Value.self) {
            return withUnsafeBytes(of: bits) { $0.load(as: Value.self) }
        }
        return unsafeDowncast(box.unsafelyUnwrapped, to: ValueBox<Value>.self).value
    }
}

/// Holds an erased value that is not stored inline. Its only stored property has the bare type
/// `Value`, so releasing it needs no metadata lookup either.
@usableFromInline
final class ValueBox<Value> {
    @usableFromInline let value: Value
    @inlinable init(_ value: Value) { self.value = value }
}

/// The pure state of a promise: pending with waiters, or settled with an outcome.
///
/// Invariants:
/// * `outcome == nil` ⇔ pending; once set it never changes (the first settlement wins:
///   <doc:Promises>).
/// * `coroutines`, `others` and `cancelHandlers` are empty once settled: settling hands every
///   waiter to the caller, which resumes them after releasing the lock.
/// * `cancelHandlers` run at most once: they are handed out when the promise is cancelled, and a
///   handler added afterwards is handed back at once to be run.
/// * A task waiter that withdraws (its task was cancelled) stays in `others` as a tombstone
///   (``TaskWait/resume`` nil), counted by `withdrawnTasks`; the tombstones are dropped together
///   once they could be half of `others`, so withdrawal is O(1) amortised and `others` holds at
///   most about twice its live waiters. Settling skips tombstones.
/// * `timeout` (the promise of `Promise.timeout` only) is dropped at settlement, which disarms its
///   timer; while the promise is pending it is pinned (kept alive by its own timer) from the first
///   task or observer waiter on, because nothing else might hold it (see ``PromiseTimeout``).
///
/// Nothing here depends on the promise's `Value` (see ``PromiseOutcome``).
@usableFromInline
struct PromiseStateMachine {
    /// A waiter that is not a coroutine (coroutines, the hot path, have their own list of plain
    /// tickets so that no multi-payload enum is copied when a coroutine waits).
    @usableFromInline
    enum Waiter {
        /// A Swift task awaiting `value` (a tombstone once the task has withdrawn it).
        case task(TaskWait)
        /// An observer (`then`, `catch`, …) to run as a job on a scheduler.
        case observer(CoroutineScheduler, @Sendable (PromiseOutcome) -> Void)
    }

    /// What a settlement hands back to be resumed outside the lock.
    @usableFromInline
    struct Settled {
        @usableFromInline var coroutines: WaiterList<WaitTicket>
        @usableFromInline var others: [Waiter]
        /// The timer of a `Promise.timeout` promise, released with the settlement (outside the
        /// lock), which disarms it.
        @usableFromInline var timeout: PromiseTimeout?
        @inlinable init(coroutines: WaiterList<WaitTicket>, others: [Waiter], timeout: PromiseTimeout?) {
            self.coroutines = coroutines
            self.others = others
            self.timeout = timeout
        }
    }

    @usableFromInline var outcome: PromiseOutcome?
    @usableFromInline var coroutines = WaiterList<WaitTicket>()
    @usableFromInline var others: [Waiter] = []
    @usableFromInline var cancelHandlers = WaiterList<@Sendable () -> Void>()
    @usableFromInline var isCancelled = false
    /// Task waiters in `others` that withdrew and were not dropped yet (declared beside
    /// `isCancelled` so that it takes that field's padding: the state does not grow).
    @usableFromInline var withdrawnTasks: UInt32 = 0
    /// The coroutine of `Coroutine.async` that `cancel()` cancels; dropped once settled.
    /// Not retained: that coroutine settles this promise before it finishes (its body's outcome,
    /// or the reason it never ran), and its scheduler's registry keeps it alive until it has
    /// finished — so the reference is valid for as long as it is here. A user of it retains it
    /// under the lock.
    @usableFromInline var linkedCoroutine: Unmanaged<Coroutine>?
    /// The timer of the promise made by `Promise.timeout`; nil for every other promise.
    @usableFromInline var timeout: PromiseTimeout?

    @inlinable
    init() {}

    @inlinable
    var isPending: Bool { outcome == nil }

    /// Settles; returns the waiters to resume, or nil if already settled.
    @inlinable
    mutating func settle(_ o: PromiseOutcome) -> Settled? {
        guard outcome == nil else { return nil }
        outcome = o
        let settled = Settled(coroutines: coroutines, others: others, timeout: timeout)
        coroutines = WaiterList()
        others = []
        withdrawnTasks = 0
        timeout = nil
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
        if outcome != nil { return false }   // settled otherwise: never cancelled now
        cancelHandlers.append(h)
        return false
    }

    /// Adds a coroutine waiter unless settled; returns true if settled.
    @inlinable
    mutating func add(_ ticket: WaitTicket) -> Bool {
        if outcome != nil { return true }
        coroutines.append(ticket)
        return false
    }

    /// Adds a task or observer waiter unless settled; returns the outcome if settled.
    @inlinable
    mutating func add(_ w: Waiter) -> PromiseOutcome? {
        if let outcome { return outcome }
        others.append(w)
        if let timeout { timeout.pinOwner() }
        return nil
    }

    /// Removes a coroutine's waiter (after cancellation or timeout).
    @inlinable
    mutating func remove(_ ticket: WaitTicket) {
        coroutines.withdraw(ticket)
    }

    /// Withdraws a task's waiter (its task was cancelled) and returns its resumption, or nil if
    /// the promise has settled (the settlement resumes it) or `wait` is not queued.
    /// - Complexity: O(1) amortised (see the invariants).
    @inlinable
    mutating func withdraw(_ wait: TaskWait) -> (@Sendable (PromiseOutcome) -> Void)? {
        guard outcome == nil, let resume = wait.resume else { return nil }
        wait.resume = nil
        withdrawnTasks += 1
        if Int(withdrawnTasks) * 2 > others.count {
            others.removeAll { if case .task(let w) = $0 { w.resume == nil } else { false } }
            withdrawnTasks = 0
        }
        return resume
    }
}

/// A Swift task's wait in `Promise.value`: its resumption while queued, nil once withdrawn or
/// before it is queued.
///
/// Thread-safety: read and written under the promise's lock only, except by the settlement,
/// which reads `resume` after taking the waiters out (no one writes it after that: withdrawal
/// sees the outcome and leaves it alone).
@usableFromInline
final class TaskWait: @unchecked Sendable {
    @usableFromInline var resume: (@Sendable (PromiseOutcome) -> Void)?
    @inlinable init() {}
}
