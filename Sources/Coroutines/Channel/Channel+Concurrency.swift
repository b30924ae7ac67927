import Dispatch
import Synchronization

/// Channels from Swift concurrency (see <doc:CoroutinesAndSwiftConcurrency>).
extension Channel {
    /// Sends `value` from async code, suspending the calling task (not a thread) until it is
    /// taken or buffered.
    ///
    /// The send runs in a coroutine on a pool scheduler. Cancelling the task cancels that
    /// coroutine: if the value was not delivered yet, it never will be and this throws
    /// `CancellationError`; if it was, this returns normally (see <doc:Cancellation>).
    /// - Throws: ``ChannelError/closed``, or `CancellationError`.
    /// - Suspends: the calling task.
    public func send(_ value: Element) async throws {
        try await Coroutine.bridge { try self.send(value) }
    }

    /// Receives a value from async code, suspending the calling task (not a thread).
    ///
    /// Cancelling the task withdraws the receive: no value is consumed and lost.
    /// - Returns: The oldest value.
    /// - Throws: ``ChannelError/closed`` (or the close error) once closed and drained;
    ///   `CancellationError`.
    /// - Suspends: the calling task.
    public func receive() async throws -> Element {
        try await Coroutine.bridge { try self.receive() }
    }

    /// The channel as an `AsyncSequence`, for `for try await value in channel.elements`.
    ///
    /// The loop ends when the channel is closed and drained; if it was closed with
    /// ``close(throwing:)``, the loop throws that error instead. Cancelling the task makes the
    /// loop throw `CancellationError` without consuming a value.
    public var elements: Elements { Elements(channel: self) }

    /// An `AsyncSequence` view of a channel; see ``Channel/elements``.
    public struct Elements: AsyncSequence, Sendable {
        let channel: Channel<Element>

        /// Creates the iterator. O(1).
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }

        /// Receives with ``Channel/receive()-7wld3``; nil once closed and drained.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let channel: Channel<Element>

            /// The next value, or nil at the end.
            /// - Throws: the error given to ``Channel/close(throwing:)``; `CancellationError`.
            public mutating func next() async throws -> Element? {
                do {
                    return try await channel.receive()
                } catch ChannelError.closed {
                    return nil
                }
            }
        }
    }
}

extension Coroutine {
    /// Runs `operation` in a coroutine on a pool scheduler and awaits its result from a task.
    ///
    /// Cancelling the task cancels the coroutine; the task gets exactly the coroutine's outcome,
    /// so an operation that completed is never reported as cancelled (nothing is lost).
    static func bridge<Value: Sendable>(_ operation: @escaping @Sendable () throws -> Value) async throws -> Value {
        let link = BridgeLink()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (k: CheckedContinuation<Value, any Error>) in
                let outcome = BridgeOutcome(k)
                let c = Coroutine(scheduler: SchedulerPool.default(for: .default).next(), name: "async bridge",
                                  stackSize: nil, reportsUnobservedErrors: false, unstartedObserver: outcome,
                                  body: { outcome.resume(with: Result { try operation() }) })
                if link.attach(c) {
                    c.start(parent: nil)
                } else {
                    outcome.resume(with: .failure(CancellationError()))
                }
            }
        } onCancel: {
            link.cancel()
        }
    }
}

/// The coroutine of a ``Coroutine/bridge(_:)`` call, or the fact that its task was cancelled first.
final class BridgeLink: Sendable {
    private let state = Mutex<(coroutine: Coroutine?, cancelled: Bool)>((nil, false))

    /// Records the coroutine. Returns false if the task was already cancelled (do not start it).
    func attach(_ c: Coroutine) -> Bool {
        state.locked { s in
            if s.cancelled { return false }
            s.coroutine = c
            return true
        }
    }

    func cancel() {
        let c: Coroutine? = state.locked { s in
            s.cancelled = true
            return s.coroutine
        }
        c?.cancel()
    }
}

/// Resumes a bridge's continuation exactly once: with the body's result, or with the error of a
/// coroutine that never ran.
final class BridgeOutcome<Value: Sendable>: UnstartedObserver, Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, any Error>?>

    init(_ k: CheckedContinuation<Value, any Error>) { continuation = Mutex(k) }

    func resume(with result: Result<Value, any Error>) {
        continuation.locked { k in
            let taken = k
            k = nil
            return taken
        }?.resume(with: result)
    }

    func coroutineNeverRan(_ error: any Error) { resume(with: .failure(error)) }
}
