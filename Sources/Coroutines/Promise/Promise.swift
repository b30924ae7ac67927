import Dispatch
import Synchronization

/// A value that will be available later: fulfilled with a value or rejected with an error, once.
///
/// Coroutines wait for it with ``await()``, async code with ``value``, and callbacks with
/// ``then(_:)-(…)``, ``catch(_:)``, ``recover(_:)`` and ``always(_:)``.
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
/// `fulfill`/`reject` (SPEC §5).
public final class Promise<Value: Sendable>: Sendable {
    @usableFromInline let state: Mutex<PromiseStateMachine<Value>>

    /// Creates a pending promise.
    @inlinable
    public init() {
        state = Mutex(PromiseStateMachine())
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
        let r: Result<Value, any Error> = .failure(CancellationError())
        let taken: (WaiterList<@Sendable () -> Void>, Coroutine?, PromiseStateMachine<Value>.Settled)? = state.locked { s in
            guard s.result == nil else { return nil }
            let handlers = s.cancel()
            let coroutine = s.linkedCoroutine
            guard let settled = s.settle(r) else { return nil }
            dispatchObservers(settled, r)
            return (handlers, coroutine, settled)
        }
        guard let (handlers, coroutine, settled) = taken else { return }
        resumeWaiters(settled, r)
        coroutine?.cancel()
        handlers.forEach { $0() }
    }

    /// Registers a handler run once if the promise is cancelled with ``cancel()``.
    ///
    /// A handler registered after cancellation runs at once, asynchronously (as a job); one
    /// registered after another settlement never runs.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.locked { $0.addCancelHandler(handler) }
        if runNow { CoroutineScheduler.forObservers().execute(handler) }
    }

    /// Links the coroutine of `Coroutine.async`: cancelling the promise cancels it.
    @usableFromInline
    func link(_ c: Coroutine) {
        state.locked { s in if s.result == nil { s.linkedCoroutine = c } }
    }

    /// Whether the promise is not settled yet.
    public var isPending: Bool { state.locked { $0.result == nil } }
    /// Whether the promise was fulfilled.
    public var isFulfilled: Bool { state.locked { if case .success? = $0.result { true } else { false } } }
    /// Whether the promise was rejected (including by ``cancel()``).
    public var isRejected: Bool { state.locked { if case .failure? = $0.result { true } else { false } } }
    /// The settlement, or nil while pending.
    public var result: Result<Value, any Error>? { state.locked { $0.result } }

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
    /// - Complexity: O(1) to register; O(waiters) to withdraw after cancellation.
    @inlinable
    public func await() throws -> Value {
        let c = try Coroutine.requireCurrent()
        try c.wait(.promise, register: { ticket in
            state.locked { $0.add(ticket) }
        }, unregister: { ticket in
            state.locked { $0.remove(ticket) }
        })
        guard let r = state.locked({ $0.result }) else {
            preconditionFailure("internal inconsistency: a promise waiter was resumed while pending")
        }
        return try r.get()
    }

    /// Adds an observer that runs once with the settlement, as a job on the scheduler current now
    /// (else a pool scheduler) — never synchronously.
    @inlinable
    func observe(_ body: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        let scheduler = CoroutineScheduler.forObservers()
        state.locked { s in
            // Queued under the lock, so observers reach a scheduler in registration order even
            // when the promise is being settled on another thread right now.
            if let r = s.add(.observer(scheduler, body)) { scheduler.execute { body(r) } }
        }
    }

    @inlinable
    func settle(_ r: Result<Value, any Error>) -> Bool {
        let settled: PromiseStateMachine<Value>.Settled? = state.locked { s in
            guard let settled = s.settle(r) else { return nil }
            dispatchObservers(settled, r)
            return settled
        }
        guard let settled else { return false }
        resumeWaiters(settled, r)
        return true
    }

    /// Queues the observers of a settlement as jobs (under the lock: see `observe`). Queuing runs
    /// no user code.
    @inlinable
    func dispatchObservers(_ settled: PromiseStateMachine<Value>.Settled, _ r: Result<Value, any Error>) {
        for case .observer(let scheduler, let body) in settled.others {
            scheduler.execute { body(r) }
        }
    }

    /// Resumes the coroutines and tasks of a settlement (after the lock is released).
    @inlinable
    func resumeWaiters(_ settled: PromiseStateMachine<Value>.Settled, _ r: Result<Value, any Error>) {
        settled.coroutines.forEach { $0.resume() }
        for case .continuation(_, let k) in settled.others {
            k.resume(with: r)
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
    func coroutineNeverRan(_ error: any Error) { reject(error) }
}
