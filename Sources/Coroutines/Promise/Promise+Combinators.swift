import CCoroutines
import Synchronization

/// Chaining and combining promises (see <doc:Promises>). Every observer runs once, as a job on the
/// scheduler current at registration (else a pool scheduler), outside any coroutine; it must not
/// block or call suspending operations.
extension Promise {
    /// A promise of `transform` applied to this promise's value.
    ///
    /// A rejection skips `transform` and passes on; if `transform` throws, the derived promise is
    /// rejected with that error.
    /// - Complexity: O(1).
    public func then<U: Sendable>(_ transform: @escaping @Sendable (Value) throws -> U) -> Promise<U> {
        let derived = Promise<U>()
        observe { r in
            switch r {
            case .success(let v):
                do { derived.fulfill(try transform(v)) } catch { derived.reject(error) }
            case .failure(let e):
                derived.reject(e)
            }
        }
        return derived
    }

    /// A promise that adopts the state of the promise `transform` returns for this value.
    /// - Complexity: O(1).
    public func then<U: Sendable>(_ transform: @escaping @Sendable (Value) throws -> Promise<U>) -> Promise<U> {
        let derived = Promise<U>()
        observe { r in
            switch r {
            case .success(let v):
                do { try transform(v).observe { derived.settleFrom($0) } } catch { derived.reject(error) }
            case .failure(let e):
                derived.reject(e)
            }
        }
        return derived
    }

    /// Runs `handler` with the rejection error, and passes the rejection on.
    /// - Returns: A promise settled like this one.
    public func `catch`(_ handler: @escaping @Sendable (any Error) -> Void) -> Promise<Value> {
        let derived = Promise<Value>()
        observe { r in
            if case .failure(let e) = r { handler(e) }
            derived.settleFrom(r)
        }
        return derived
    }

    /// Turns a rejection into a value (or another error, if `transform` throws).
    public func recover(_ transform: @escaping @Sendable (any Error) throws -> Value) -> Promise<Value> {
        let derived = Promise<Value>()
        observe { r in
            switch r {
            case .success(let v): derived.fulfill(v)
            case .failure(let e):
                do { derived.fulfill(try transform(e)) } catch { derived.reject(error) }
            }
        }
        return derived
    }

    /// Runs `handler` with the settlement, whichever it is.
    /// - Returns: A promise settled like this one (after `handler` ran).
    public func always(_ handler: @escaping @Sendable (Result<Value, any Error>) -> Void) -> Promise<Value> {
        let derived = Promise<Value>()
        observe { r in
            handler(r)
            derived.settleFrom(r)
        }
        return derived
    }

    /// A promise settled like this one, or rejected with `PromiseError.timedOut` if this one has
    /// not settled after `duration`.
    ///
    /// The timer is armed on the current scheduler if it runs by itself (a dedicated or pool
    /// scheduler), else on a scheduler of the default pool. It is released when this promise
    /// settles first, and when the returned promise is freed unsettled: a timeout that nothing
    /// holds, awaits or observes any more keeps no timer armed. A task awaiting `value` or an
    /// observer registered on the returned promise keeps it alive until it settles.
    /// If the timer's scheduler has stopped before the timer could be armed, the returned promise
    /// is rejected with `CoroutineError.schedulerStopped` (see <doc:DelaysAndTimeouts>).
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(log timers) on the timer's scheduler.
    public func timeout(_ duration: Duration) -> Promise<Value> {
        timeout(duration, on: CoroutineScheduler.forTimers())
    }

    /// ``timeout(_:)`` with its timer on `scheduler`.
    func timeout(_ duration: Duration, on scheduler: CoroutineScheduler) -> Promise<Value> {
        let derived = Promise<Value>()
        // Weak: see PromiseTimeout for who keeps `derived` alive.
        let timer = scheduler.scheduleTimer(
            deadline: deadlineNanoseconds(after: duration),
            { [weak derived] in derived?.reject(PromiseError.timedOut) },
            onStopped: { [weak derived] in derived?.reject(CoroutineError.schedulerStopped) })
        derived.withState { $0.timeout = PromiseTimeout(timer: timer, owner: derived) }
        // Settling `derived` drops its PromiseTimeout, which disarms the timer.
        observe { [weak derived] r in derived?.settleFrom(r) }
        return derived
    }

    /// A promise of all values, in input order; rejected by the first rejection (fail fast).
    /// `all([])` is fulfilled with `[]`.
    /// - Complexity: O(n).
    public static func all(_ promises: [Promise<Value>]) -> Promise<[Value]> {
        let derived = Promise<[Value]>()
        guard !promises.isEmpty else {
            derived.fulfill([])
            return derived
        }
        let collected = Mutex<(values: [Value?], remaining: Int)>((Array(repeating: nil, count: promises.count), promises.count))
        for (i, p) in promises.enumerated() {
            p.observe { r in
                switch r {
                case .failure(let e):
                    derived.reject(e)
                case .success(let v):
                    let done: [Value]? = collected.locked { c in
                        c.values[i] = v
                        c.remaining -= 1
                        return c.remaining == 0 ? c.values.map { $0! } : nil
                    }
                    if let done { derived.fulfill(done) }
                }
            }
        }
        return derived
    }

    /// A promise settled like the first of `promises` to settle. `race([])` is rejected with
    /// `PromiseError.empty`.
    /// - Complexity: O(n).
    public static func race(_ promises: [Promise<Value>]) -> Promise<Value> {
        let derived = Promise<Value>()
        guard !promises.isEmpty else {
            derived.reject(PromiseError.empty)
            return derived
        }
        for p in promises { p.observe { derived.settleFrom($0) } }
        return derived
    }

    func settleFrom(_ r: Result<Value, any Error>) {
        switch r {
        case .success(let v): fulfill(v)
        case .failure(let e): reject(e)
        }
    }
}
