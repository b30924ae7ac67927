import Synchronization
/// Awaiting a promise from Swift concurrency (SPEC §11).
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
                    let now: Result<Value, any Error>? = state.locked { s in
                        if let r = s.result { return r }
                        if Task.isCancelled { return .failure(CancellationError()) }
                        _ = s.add(.continuation(id: id, k))
                        return nil
                    }
                    if let now { k.resume(with: now) }
                }
            } onCancel: {
                state.locked { $0.removeContinuation(id: id) }?.resume(throwing: CancellationError())
            }
        }
    }
}
