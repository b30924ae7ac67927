/// The FIFO queue of a ``CoroutineActor``'s incoming messages, iterated by the actor's body:
/// `for envelope in mailbox { … }`.
///
/// The iteration suspends the actor's coroutine while the mailbox is empty. It ends when the
/// actor is cancelled (at the next iteration) or when its scheduler stops. The mailbox is
/// unbounded: senders never wait.
///
/// - Thread-safety: `Sendable`; iterate it only from the actor's own coroutine (iterating it
///   outside a coroutine is a programming error and traps).
public final class Mailbox<Message: Sendable, Reply: Sendable>: Sendable, Sequence {
    @usableFromInline let channel = Channel<Envelope<Message, Reply>>(capacity: .unbounded)
    /// The envelope the body is handling (the last one the iterator returned), kept so that an
    /// error thrown by the body rejects it with that error. Confined to the actor's coroutine.
    @usableFromInline let inHand = UncheckedCell<Envelope<Message, Reply>?>(nil)

    init() {}

    /// Returns an iterator over the incoming envelopes.
    @available(*, noasync, message: "a mailbox is iterated by the actor's coroutine")
    public func makeIterator() -> Iterator { Iterator(mailbox: self) }

    /// Receives envelopes in FIFO order; `next()` returns nil once the actor is cancelled.
    ///
    /// - Suspends: in `next()`, while the mailbox is empty; resumes on the actor's scheduler.
    public struct Iterator: IteratorProtocol {
        @usableFromInline let mailbox: Mailbox<Message, Reply>

        @inlinable init(mailbox: Mailbox<Message, Reply>) { self.mailbox = mailbox }

        /// The next envelope, or nil when the loop must end (cancellation, stopped scheduler).
        @inlinable
        public mutating func next() -> Envelope<Message, Reply>? {
            mailbox.inHand.value = nil   // the previous envelope: released (noReply if unanswered)
            do {
                let envelope = try mailbox.channel.receive()
                mailbox.inHand.value = envelope
                return envelope
            } catch CoroutineError.notInCoroutine {
                fatalError("a Mailbox is iterated only by its actor's coroutine (`for envelope in mailbox` in the body of CoroutineActor)")
            } catch {
                return nil
            }
        }
    }

    /// Enqueues a message. Returns false if the actor has terminated.
    @inlinable
    func post(_ envelope: Envelope<Message, Reply>) -> Bool {
        (try? channel.trySend(envelope)) ?? false
    }

    /// Enqueues a message as ``post(_:)`` does, but if the actor's coroutine is waiting for one
    /// (idle), hands it the envelope and makes it ready to run *next* on its scheduler when called
    /// on that scheduler's thread (``CoroutineScheduler/makeReadyNext(_:)``): a requester that
    /// suspends right after switches straight to the actor. Returns false if the actor has
    /// terminated. - Complexity: O(1) amortised.
    @inlinable
    func postNext(_ envelope: Envelope<Message, Reply>) -> Bool {
        channel.lock.lock()
        let action = channel.state.send(envelope)
        channel.lock.unlock()
        switch consume action {
        case .delivered(let actor):
            envelope.isHandOff = true   // before the wake: the actor reads it only after
            actor.coroutine._withUnsafeGuaranteedRef { $0.wakeClaimedNext() }
            return true
        case .buffered:
            return true
        case .closed, .full:   // unbounded: never full
            return false
        }
    }

    /// Ends the mailbox: later posts fail, and every queued envelope is rejected with
    /// ``ActorError/terminated``. Idempotent.
    func terminate() {
        channel.close()
        while let envelope = try? channel.tryReceive() {
            envelope.fail(ActorError.terminated)
        }
    }
}

/// A mutable box for state confined to one coroutine (and therefore one thread).
@usableFromInline
final class UncheckedCell<Value>: @unchecked Sendable {
    @usableFromInline @exclusivity(unchecked) var value: Value
    @inlinable init(_ value: Value) { self.value = value }
}
