import Synchronization
/// Awaiting a promise from Swift concurrency (see <doc:CoroutinesAndSwiftConcurrency>).
extension Promise {
    /// The promise's value, awaited by a Swift task.
    ///
    /// Cancelling the awaiting task removes its waiter and throws `CancellationError`; the
    /// promise itself is not cancelled.
    /// - Throws: The rejection error, or `CancellationError`.
    /// - Suspends: the calling task, not a thread.
    public var value: Value {
        get async throws {
            let id = JoinerIDs.next()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (k: CheckedContinuation<Value, any Error>) in
                    // nil: waiting; otherwise resume now with this outcome.
                    let resume: @Sendable (PromiseOutcome) -> Void = { k.resume(with: $0.result(as: Value.self)) }
                    let now: PromiseOutcome? = withState { s in
                        if let o = s.outcome { return o }
                        if Task.isCancelled { return .rejected(CancellationError()) }
                        _ = s.add(.continuation(id: id, resume))
                        return nil
                    }
                    if let now { resume(now) }
                }
            } onCancel: {
                withState { $0.removeContinuation(id: id) }?(.rejected(CancellationError()))
            }
        }
    }
}
