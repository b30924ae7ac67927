import Synchronization
/// Awaiting a promise from Swift concurrency (see <doc:CoroutinesAndSwiftConcurrency>).
extension Promise {
    /// The promise's value, awaited by a Swift task.
    ///
    /// Cancelling the awaiting task withdraws its waiter and throws `CancellationError`; the
    /// promise itself is not cancelled.
    /// - Throws: The rejection error, or `CancellationError`.
    /// - Suspends: the calling task, not a thread; it resumes on the task's own executor.
    /// - Complexity: O(1) amortised to wait and to withdraw (a withdrawn waiter is a tombstone
    ///   until tombstones could be half of the promise's task and observer waiters).
    ///   Thread-safe.
    public var value: Value {
        get async throws {
            let wait = TaskWait()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (k: CheckedContinuation<Value, any Error>) in
                    // nil: waiting; otherwise resume now with this outcome.
                    let resume: @Sendable (PromiseOutcome) -> Void = { k.resume(with: $0.result(as: Value.self)) }
                    let now: PromiseOutcome? = withState { s in
                        if let o = s.outcome { return o }
                        if Task.isCancelled { return .rejected(CancellationError()) }
                        wait.resume = resume
                        _ = s.add(.task(wait))
                        return nil
                    }
                    if let now { resume(now) }
                }
            } onCancel: {
                withState { $0.withdraw(wait) }?(.rejected(CancellationError()))
            }
        }
    }
}
