import CCoroutines
import Dispatch
import Synchronization

/// A value that will be available later: fulfilled with a value or rejected with an error, once.
///
/// Coroutines wait for it with ``await()``, async code with ``value``, and callbacks with
/// ``then(_:)-((Value)->U)``, ``catch(_:)``, ``recover(_:)`` and ``always(_:)``.
///
/// ```swift
/// let p = Promise<Int>()
/// Coroutine.launch { print(try p.await()) }   // suspends until fulfilled
/// p.fulfill(42)                                // from any thread
/// ```
///
/// ## Threading
/// Every member is thread-safe. Settlement and registration take one lock; waiters are resumed
/// after it is released. Coroutines resume on their own scheduler; observers run as jobs on the
/// scheduler current when they were registered (else a pool scheduler), never inside
/// `fulfill`/`reject` (see <doc:Promises>).
public final class Promise<Value: Sendable>: @unchecked Sendable {
    /// Non-generic state (the value is type-erased), so that releasing a promise looks up no
    /// generic metadata.
    @usableFromInline let lock = FutexLock()
    /// Guarded by `lock` (use ``withState(_:)``). Promise is `@unchecked Sendable` for this field.
    @usableFromInline @exclusivity(unchecked) var unsafeState = PromiseStateMachine()
    /// The body of the `Coroutine.async` coroutine that settles this promise: set before the
    /// coroutine is queued (the queueing orders it before the coroutine runs), then taken once by
    /// that coroutine, on its scheduler's thread (``runCoroutineBody()``), or released if it
    /// never runs.
    @usableFromInline @exclusivity(unchecked) var coroutineBody: (@Sendable () throws -> Value)?

    /// Creates a pending promise.
    @inlinable
    public init() {
    }

    /// Runs `body` with the state, holding the lock. Never call user code or suspend inside.
    @inlinable @inline(__always)
    func withState<R>(_ body: (inout PromiseStateMachine) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&unsafeState)
    }

    /// Creates a pending promise and runs `body` with it at once (on the calling thread).
    /// - Parameter body: Typically starts work that later fulfils or rejects the promise.
    public convenience init(_ body: @escaping @Sendable (Promise<Value>) -> Void) {
        self.init()
        body(self)
    }

    /// A promise already fulfilled with `value`.
    public static func fulfilled(_ value: Value) -> Promise<Value> {
        let p = Promise()
        p.fulfill(value)
        return p
    }

    /// A promise already rejected with `error`.
    public static func rejected(_ error: any Error) -> Promise<Value> {
        let p = Promise()
        p.reject(error)
        return p
    }

    /// Fulfils the promise with `value` if it is still pending.
    /// - Returns: true if this call settled the promise; false if it was already settled.
    /// - Suspends: no; never checks cancellation. Waiters run later, never inside this call.
    /// - Complexity: O(waiters).
    @inlinable @discardableResult
    public func fulfill(_ value: Value) -> Bool { settle(.success(value)) }

    /// Rejects the promise with `error` if it is still pending.
    /// - Returns: true if this call settled the promise.
    /// - Suspends: no; never checks cancellation.
    /// - Complexity: O(waiters).
    @inlinable @discardableResult
    public func reject(_ error: any Error) -> Bool { settle(.failure(error)) }

    /// Rejects the promise with `CancellationError` and runs the ``onCancel(_:)`` handlers once.
    ///
    /// For the promise of `Coroutine.async`, this cancels the coroutine. Does nothing if the
    /// promise was already settled.
    /// - Suspends: no. Thread-safe.
    public func cancel() {
        // Rejection and taking the handlers are one step: a racing fulfil either wins before it
        // (nothing happens here) or loses (the handlers run).
        let o = PromiseOutcome.rejected(CancellationError())
        let taken: (WaiterList<@Sendable () -> Void>, Coroutine?, PromiseStateMachine.Settled)? = withState { s in
            guard s.isPending else { return nil }
            let handlers = s.cancel()
            // Retained here, under the lock: the link is valid only while the promise is pending.
            let coroutine = s.linkedCoroutine?.takeUnretainedValue()
            guard let settled = s.settle(o) else { return nil }
            Self.dispatchObservers(settled, o)
            return (handlers, coroutine, settled)
        }
        guard let (handlers, coroutine, settled) = taken else { return }
        Self.resumeWaiters(settled, o)
        coroutine?.cancel()
        handlers.forEach { $0() }
    }

    /// Registers a handler run once if the promise is cancelled with ``cancel()``.
    ///
    /// A handler registered after cancellation runs at once, asynchronously (as a job); one
    /// registered after another settlement never runs.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let runNow = withState { $0.addCancelHandler(handler) }
        if runNow { CoroutineScheduler.forObservers().execute(handler) }
    }

    /// Links the coroutine of `Coroutine.async`: cancelling the promise cancels it.
    ///
    /// Called before the promise or the coroutine is visible to any other code (before the
    /// coroutine is queued and the promise returned), so it takes no lock: the queueing
    /// publishes the write.
    @usableFromInline
    func link(_ c: Unmanaged<Coroutine>) {
        unsafeState.linkedCoroutine = c
    }

    /// Whether the promise is not settled yet.
    public var isPending: Bool { withState { $0.isPending } }
    /// Whether the promise was fulfilled.
    public var isFulfilled: Bool { withState { if case .fulfilled? = $0.outcome { true } else { false } } }
    /// Whether the promise was rejected (including by ``cancel()``).
    public var isRejected: Bool { withState { if case .rejected? = $0.outcome { true } else { false } } }
    /// The settlement, or nil while pending.
    public var result: Result<Value, any Error>? { withState { $0.outcome }?.result(as: Value.self) }

    /// Suspends the current coroutine until the promise settles.
    ///
    /// Works for a promise settled before the call too. Many coroutines may await one promise.
    /// Cancelling the waiting coroutine makes this throw `CancellationError`; the promise itself
    /// is not cancelled.
    ///
    /// - Returns: The value.
    /// - Throws: The rejection error; `CoroutineError.notInCoroutine` outside a coroutine;
    ///   `CancellationError` if the coroutine is cancelled; `CoroutineError.timedOut` in an
    ///   expiring `withTimeout`.
    /// - Suspends: yes, unless settled; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) to register; O(1) amortised to withdraw after cancellation (a tombstone in a long queue: see `WaiterList`).
    @inlinable
    public func await() throws -> Value {
        let outcome: PromiseOutcome = try Coroutine.withCurrent { c in
            // A promise already settled (a coroutine collecting its children's results) is read
            // with one lock round and no waiter: no ticket, no armed epoch. The interrupt check
            // still comes first, as for any suspending call (see the Cancellation article,
            // <doc:Cancellation>).
            try c.checkInterrupts()
            if let o = withState({ $0.outcome }) { return o }
            try c.wait(.promise, register: { ticket in
                withState { $0.add(ticket) }
            }, unregister: { ticket in
                withState { $0.remove(ticket) }
            })
            // Settled, or the wait would have thrown. Read under the lock: reading a field of
            // `unsafeState` is an access to the whole variable, which would race (in Swift's
            // memory model, and as ThreadSanitizer reports it) with another thread's `withState`.
            guard let o = withState({ $0.outcome }) else {
                preconditionFailure("internal inconsistency: a promise waiter was resumed while pending")
            }
            return o
        }
        return try outcome.result(as: Value.self).get()
    }

    /// Adds an observer that runs once with the settlement, as a job on the scheduler current now
    /// (else a pool scheduler) — never synchronously.
    @inlinable
    func observe(_ body: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        let scheduler = CoroutineScheduler.forObservers()
        let typed: @Sendable (PromiseOutcome) -> Void = { body($0.result(as: Value.self)) }
        withState { s in
            // Queued under the lock, so observers reach a scheduler in registration order even
            // when the promise is being settled on another thread right now.
            if let o = s.add(.observer(scheduler, typed)) { scheduler.execute { typed(o) } }
        }
    }

    @inlinable
    func settle(_ r: Result<Value, any Error>) -> Bool {
        let o = PromiseOutcome(r)
        let settled: PromiseStateMachine.Settled? = withState { s in
            guard let settled = s.settle(o) else { return nil }
            Self.dispatchObservers(settled, o)
            return settled
        }
        guard let settled else { return false }
        Self.resumeWaiters(settled, o)
        return true
    }

    /// Queues the observers of a settlement as jobs (under the lock: see `observe`). Queuing runs
    /// no user code.
    @usableFromInline
    static func dispatchObservers(_ settled: PromiseStateMachine.Settled, _ o: PromiseOutcome) {
        for case .observer(let scheduler, let body) in settled.others {
            scheduler.execute { body(o) }
        }
    }

    /// Resumes the coroutines and tasks of a settlement (after the lock is released).
    @inlinable
    static func resumeWaiters(_ settled: PromiseStateMachine.Settled, _ o: PromiseOutcome) {
        settled.coroutines.forEach { $0.resume() }
        for case .task(let wait) in settled.others {
            wait.resume?(o)
        }
    }
}

extension CoroutineScheduler {
    /// Where an observer registered now runs: the current scheduler, else a pool scheduler.
    @usableFromInline
    static func forObservers() -> CoroutineScheduler {
        if let c = Coroutine.current { return c.scheduler }
        return current ?? SchedulerPool.default(for: .default).next()
    }

    /// Where a timer that may outlive the current code is armed: the current scheduler if it runs
    /// by itself (dedicated or pool); else a pool scheduler (a temporary scheduler ends with its
    /// runBlocking body, and main runs only while something drives it).
    static func forTimers() -> CoroutineScheduler {
        let s = forObservers()
        switch s.kind {
        case .pool, .dedicated: return s
        case .main, .temporary: return SchedulerPool.default(for: .default).next()
        }
    }
}

extension Promise: UnstartedObserver {
    @usableFromInline
    func coroutineNeverRan(_ error: any Error) {
        coroutineBody = nil
        reject(error)
    }

    /// ``runCoroutineBody()`` for a coroutine created when it first ran (`PendingLaunch`): links
    /// it first, so that ``cancel()`` cancels it; if the promise was cancelled before, the body
    /// is dropped without running. (Fulfilled or rejected by other code meanwhile, the body runs,
    /// as it would have had the coroutine been created at launch; its outcome is then ignored.)
    /// - Throws: what the body threw (the coroutine ends with it).
    @inlinable
    func runLazilyStartedCoroutineBody() throws {
        let me = Unmanaged<Coroutine>.fromOpaque(ccoro_tls_coroutine().unsafelyUnwrapped)
        let runs = withState { s in
            guard s.isPending else { return !s.isCancelled }
            s.linkedCoroutine = me
            return true
        }
        guard runs else {
            coroutineBody = nil
            return
        }
        try runCoroutineBody()
    }

    /// Runs the `Coroutine.async` body and settles the promise with its outcome.
    /// - Throws: what the body threw (the coroutine ends with it).
    @inlinable
    func runCoroutineBody() throws {
        guard let body = coroutineBody.take() else {
            preconditionFailure("internal inconsistency: a Coroutine.async body ran twice")
        }
        do { fulfill(try body()) } catch {
            reject(error)
            throw error
        }
    }
}
