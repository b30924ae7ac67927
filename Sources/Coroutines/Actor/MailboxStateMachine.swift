/// The queue of a ``Mailbox``: its envelopes in the order they were posted, and whether the actor
/// has ended, as a pure struct. The ``Mailbox`` holds it with the lock that guards it, and does
/// the parking and waking of the actor's coroutine around it (`Mailbox.swift`).
///
/// ## Invariants
/// - Once `isClosed`, `queue` is empty and stays empty: a post to a closed mailbox is refused,
///   and closing hands every queued envelope back to be rejected.
/// - Envelopes leave `queue` in the order they entered it.
@usableFromInline
struct MailboxStateMachine<Message: Sendable, Reply: Sendable> {
    @usableFromInline var queue = RingBuffer<Envelope<Message, Reply>>(capacity: 0)
    @usableFromInline var isClosed = false

    @inlinable init() {}

    /// Queues `envelope`. Returns false, without taking it, if the mailbox is closed.
    @inlinable
    mutating func post(_ envelope: Envelope<Message, Reply>) -> Bool {
        if isClosed { return false }
        queue.append(envelope)
        return true
    }

    /// The oldest queued envelope, taken off, or nil if there is none.
    @inlinable
    mutating func take() -> Envelope<Message, Reply>? {
        queue.popFirst()
    }

    /// Closes the mailbox (idempotent) and returns the envelopes that were still queued, oldest
    /// first, for the caller to reject once it has released the lock.
    @inlinable
    mutating func close() -> [Envelope<Message, Reply>] {
        isClosed = true
        var drained: [Envelope<Message, Reply>] = []
        while let envelope = queue.popFirst() { drained.append(envelope) }
        return drained
    }

    @inlinable var count: Int { queue.count }
}
