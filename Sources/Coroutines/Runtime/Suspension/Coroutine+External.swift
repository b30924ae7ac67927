import Synchronization

/// The entry point for modules of this package (CoroutinesFoundation) that suspend a coroutine
/// until a callback-based operation completes, without re-implementing the suspension protocol.
extension Coroutine {
    /// What a coroutine suspended in ``suspend(waitingFor:_:onInterrupt:)`` waits on, as shown
    /// by `Coroutine.dumpAll()`.
    package enum ExternalWait: Sendable {
        /// Blocking work running on a blocking thread pool (`Coroutine.offload`).
        case offload
        /// A callback-based operation (URLSession, Process termination, …).
        case callback
    }

    /// Suspends the current coroutine until the operation that `start` begins calls its
    /// completion, and returns that result.
    ///
    /// `start` runs at once on the coroutine's thread; it begins the operation and hands it the
    /// completion, which may be called from any thread, once (later calls are ignored), and even
    /// before `start` returns. The coroutine resumes on its own scheduler.
    ///
    /// Cancellation and `withTimeout` race with the completion on the coroutine's single claim
    /// (<doc:Cancellation>): if the completion wins, the result is returned normally; otherwise
    /// `onInterrupt` runs on the coroutine's thread (cancel the underlying operation there) and
    /// this call throws `CancellationError` or `CoroutineError.timedOut` at once — a result that
    /// arrives afterwards is discarded. If the coroutine is already cancelled, `start` never runs.
    ///
    /// - Throws: `CoroutineError.notInCoroutine` outside a coroutine; what `start` throws (the
    ///   operation then never began); the completion's error; `CancellationError`;
    ///   `CoroutineError.timedOut`.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    package static func suspend<Value: Sendable>(
        waitingFor kind: ExternalWait,
        _ start: (_ complete: @escaping @Sendable (Result<Value, any Error>) -> Void) throws -> Void,
        onInterrupt: () -> Void = {}
    ) throws -> Value {
        try withCurrent { c in
            let slot = OnceSlot<Value>()
            try c.wait(kind == .offload ? .offload : .callback, register: { ticket in
                try start { result in
                    if slot.set(result) { ticket.resume() }
                }
                return false
            }, unregister: { _ in onInterrupt() })
            guard let r = slot.get() else {
                preconditionFailure("internal inconsistency: Coroutine.suspend resumed without a result")
            }
            return try r.get()
        }
    }
}

/// A thread-safe slot that keeps the first result put into it.
private final class OnceSlot<Value: Sendable>: Sendable {
    private let slot = Mutex<Result<Value, any Error>?>(nil)

    /// Stores `r` unless a result is already there. Returns whether it was stored.
    func set(_ r: Result<Value, any Error>) -> Bool {
        slot.locked { s in
            guard s == nil else { return false }
            s = r
            return true
        }
    }

    func get() -> Result<Value, any Error>? { slot.locked { $0 } }
}
