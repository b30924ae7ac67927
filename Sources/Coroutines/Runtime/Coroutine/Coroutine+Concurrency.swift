import Synchronization

/// Bridges between coroutines and Swift concurrency (see <doc:CoroutinesAndSwiftConcurrency>).
extension Coroutine {
    /// Runs an `async` operation in a Swift `Task` and suspends the current coroutine — never its
    /// scheduler thread — until the operation ends.
    ///
    /// The scheduler keeps running its other coroutines meanwhile. Cancelling the coroutine cancels
    /// the task and makes this call throw `CancellationError` at once
    /// (<doc:CoroutinesAndSwiftConcurrency>): a result the task still produces after that is
    /// discarded. So do not wrap an operation that must not lose its result (a channel receive,
    /// say) in `Coroutine.await`; call the coroutine form directly (`try channel.receive()`).
    ///
    /// - Parameter operation: The async work.
    /// - Returns: The operation's value.
    /// - Throws: What the operation throws; `CoroutineError.notInCoroutine` outside a coroutine;
    ///   `CancellationError` if the coroutine is cancelled.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    public static func await<Value: Sendable>(_ operation: @escaping @Sendable () async throws -> Value) throws -> Value {
        try withCurrent { c in
            let box = ResultSlot<Value>()
            var task: Task<Void, Never>?
            try c.wait(.task, register: { ticket in
                task = Task {
                    let r: Result<Value, any Error>
                    do { r = .success(try await operation()) } catch { r = .failure(error) }
                    box.set(r)
                    ticket.resume()
                }
                return false
            }, unregister: { _ in task?.cancel() })
            guard let r = box.get() else {
                preconditionFailure("internal inconsistency: Coroutine.await resumed without a result")
            }
            return try r.get()
        }
    }

    /// Waits, from async code, until this coroutine has finished.
    ///
    /// Returns normally whatever the body threw (read ``error``). Cancelling the waiting task
    /// removes its waiter and throws `CancellationError`; the coroutine is not cancelled.
    ///
    /// - Throws: `CancellationError` if the waiting task is cancelled.
    /// - Suspends: the calling task, not a thread.
    public func join() async throws {
        let id = JoinerIDs.next()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case finished, waiting, cancelled }
                let outcome: Outcome = withShared { s in
                    if s.finished { return .finished }
                    if Task.isCancelled { return .cancelled }
                    s.joiners.append(id: id, continuation)
                    return .waiting
                }
                switch outcome {
                case .finished: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .waiting: break
                }
            }
        } onCancel: {
            withShared { $0.joiners.removeTask(id: id) }?.resume(throwing: CancellationError())
        }
    }
}

/// Unique ids for async waiters (so a cancelled task removes exactly its own entry).
enum JoinerIDs {
    private static let counter = Atomic<UInt64>(0)
    static func next() -> UInt64 { counter.wrappingAdd(1, ordering: .relaxed).newValue }
}

/// A thread-safe slot for one result.
final class ResultSlot<Value: Sendable>: Sendable {
    private let slot = Mutex<Result<Value, any Error>?>(nil)
    func set(_ r: Result<Value, any Error>) { slot.locked { $0 = r } }
    func get() -> Result<Value, any Error>? { slot.locked { $0 } }
}
