import Synchronization

/// A message sent to a ``CoroutineActor``, with the means to answer its sender.
///
/// The first ``reply(_:)`` or ``fail(_:)`` settles the sender's promise; later answers are
/// ignored. If the envelope is released without an answer, the sender's promise is rejected with
/// ``ActorError/noReply`` — a sender never waits forever for a dropped message.
///
/// - Thread-safety: `Sendable`; it may be answered from any thread (for example after the actor
///   handed it to other work).
public final class Envelope<Message: Sendable, Reply: Sendable>: Sendable {
    /// The message.
    public let message: Message
    @usableFromInline let promise: Promise<Reply>
    /// Set by the first answer, so that releasing an answered envelope does no generic work.
    @usableFromInline let answered = Atomic<Bool>(false)

    @inlinable
    init(_ message: Message, _ promise: Promise<Reply>) {
        self.message = message
        self.promise = promise
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            promise.reject(ActorError.noReply)   // does nothing if settled otherwise
        }
    }

    /// Fulfils the sender's promise with `reply` (ignored after the first answer).
    /// - Suspends: no. Any thread. O(waiters of the promise).
    @inlinable
    public func reply(_ reply: Reply) {
        promise.fulfill(reply)
        answered.store(true, ordering: .releasing)
    }

    /// Rejects the sender's promise with `error` (ignored after the first answer).
    /// - Suspends: no. Any thread. O(waiters of the promise).
    @inlinable
    public func fail(_ error: any Error) {
        promise.reject(error)
        answered.store(true, ordering: .releasing)
    }

    /// Whether the envelope has been answered (or its sender's promise otherwise settled).
    public var isAnswered: Bool { !promise.isPending }
}
