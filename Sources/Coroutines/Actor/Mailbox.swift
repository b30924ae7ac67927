import Synchronization

// The mailbox of one actor: an unbounded FIFO queue of envelopes with one receiver, the actor's
// coroutine (see <doc:Actors>). Posters run on any thread; the receiver, and a requester handing
// a message straight to the idle actor, run on the actor's scheduler thread.
//
// ## How the actor parks and is woken
// The actor parks with the ordinary suspension protocol (`Coroutine.wait`): its epoch turns odd,
// and whoever claims that epoch (compare-and-swap) wakes it. There is no waiter record: a poster
// recognises a mailbox wait by `parkedEpoch`, the epoch the actor armed for it.
//
// Invariants:
//   1. `queued` mirrors `state.count`: written under `lock`, read without it.
//   2. `parkedEpoch` is written only by the actor's coroutine (the mailbox's `owner`: no other
//      coroutine may iterate it), before it arms the epoch it names, and reset to 0 if that wait
//      is interrupted (it may then never have been armed). The actor's epoch equals
//      `parkedEpoch` exactly while it waits in the mailbox: epochs only grow, so a stale value
//      never matches a later wait (of the body, on a promise, say).
//   3. No lost wake-up (Dekker's pattern, every access sequentially consistent): the actor arms
//      its epoch, then reads `queued`; a poster stores `queued`, then reads the actor's epoch.
//      One of the two sees the other: the actor does not sleep, or the poster claims its wait.
//   4. FIFO: a message is handed straight to the actor (`handed`) only while `queued` is 0 and
//      the actor waits, so it overtakes nothing. Otherwise it is queued, and the actor takes the
//      queue in order.
//   5. `handed` is written only by the claimer of a mailbox wait (one claimer per wait), before
//      it wakes the actor, and read by the actor after that wait returns: ordered by the
//      wake-up (the switch on the actor's thread, or the scheduler's incoming queue from another).
//   6. Once closed (`terminate`), nothing is queued or handed again: a post fails, and a
//      hand-off needs a waiting actor, which a terminated actor never is.

/// The FIFO queue of a ``CoroutineActor``'s incoming messages, iterated by the actor's body:
/// `for envelope in mailbox { … }`.
///
/// The iteration suspends the actor's coroutine while the mailbox is empty. It ends when the
/// actor is cancelled (at the next iteration) or when its scheduler stops. The mailbox is
/// unbounded: senders never wait.
///
/// - Thread-safety: `Sendable`; iterate it only from the actor's own coroutine (iterating it
///   from another coroutine, or outside any, is a programming error and traps).
public final class Mailbox<Message: Sendable, Reply: Sendable>: @unchecked Sendable, Sequence {
    // Thread-safety: `state` is guarded by `lock`; `queued` and `parkedEpoch` are atomics;
    // `handed` is passed from a wait's claimer to the actor (invariant 5); `inHand` is confined
    // to the actor's coroutine.

    @usableFromInline let lock = FutexLock()
    /// Guarded by `lock`.
    @usableFromInline @exclusivity(unchecked) var state = MailboxStateMachine<Message, Reply>()
    /// How many envelopes are queued (invariant 1).
    @usableFromInline let queued = Atomic<Int>(0)
    /// The epoch of the actor's latest mailbox wait (invariant 2); 0 before the first.
    @usableFromInline let parkedEpoch = Atomic<UInt64>(0)
    /// The envelope handed straight to the waiting actor (invariant 5).
    @usableFromInline @exclusivity(unchecked) var handed: Envelope<Message, Reply>?
    /// The envelope the body is handling (the last one the iterator returned), kept so that an
    /// error thrown by the body rejects it with that error. Confined to the actor's coroutine.
    @usableFromInline @exclusivity(unchecked) var inHand: Envelope<Message, Reply>?
    /// The actor's coroutine, compared (never dereferenced) with the iterating coroutine: the
    /// parking protocol names that coroutine's epochs, so no other may iterate.
    @usableFromInline @exclusivity(unchecked) var owner: UnsafeMutableRawPointer?

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
        ///
        /// Not `mutating` (the iterator's state is the mailbox's), so that the mailbox is borrowed
        /// across the suspension rather than retained.
        @inlinable
        public func next() -> Envelope<Message, Reply>? {
            mailbox.inHand = nil   // the previous envelope: released (noReply if unanswered)
            do {
                let envelope = try Coroutine.withCurrent { me in
                    if _slowPath(Unmanaged.passUnretained(me).toOpaque() != mailbox.owner) {
                        fatalError("a Mailbox is iterated only by its actor's coroutine, not by \(me)")
                    }
                    return try mailbox.receive(me)
                }
                mailbox.inHand = envelope
                return envelope
            } catch CoroutineError.notInCoroutine {
                fatalError("a Mailbox is iterated only by its actor's coroutine (`for envelope in mailbox` in the body of CoroutineActor)")
            } catch {
                return nil
            }
        }
    }

    /// The next envelope for the actor's coroutine `actor`: the queue's oldest, else the one
    /// handed to it while it waited. Suspends while there is none.
    /// - Throws: `CancellationError` (or `CoroutineError.timedOut`) if the actor is interrupted.
    @inlinable
    func receive(_ actor: Coroutine) throws -> Envelope<Message, Reply> {
        while true {
            try actor.checkInterrupts()
            if queued.load(ordering: .relaxed) > 0, let envelope = takeQueued() { return envelope }
            // Invariant 2: name the epoch about to be armed (the actor runs, so its epoch is even
            // and only it can arm it).
            let armed = actor.epoch.load(ordering: .relaxed) &+ 1
            parkedEpoch.store(armed, ordering: .relaxed)
            do {
                try actor.wait(.channel, registerEpoch: { epoch in
                    assert(epoch == armed, "internal inconsistency: a mailbox wait armed an unexpected epoch")
                    // Invariant 3: the arm came first; a post this load misses will claim the wait.
                    return queued.load(ordering: .sequentiallyConsistent) > 0
                }, unregister: { _ in })
            } catch {
                // Interrupted, perhaps before `armed` was armed: a later wait may arm it.
                parkedEpoch.store(0, ordering: .relaxed)
                throw error
            }
            if let envelope = handed.take() { return envelope }
            // Woken by a post (or not asleep at all): the envelope is queued.
        }
    }

    /// Takes the oldest queued envelope under the lock.
    @inlinable
    func takeQueued() -> Envelope<Message, Reply>? {
        lock.lock()
        let envelope = state.take()
        queued.store(state.count, ordering: .relaxed)
        lock.unlock()
        return envelope
    }

    /// Enqueues a message from any thread, and wakes `actor` (the mailbox's coroutine) if it waits
    /// in the mailbox. Returns false if the actor has terminated. - Complexity: O(1) amortised.
    @inlinable
    func post(_ envelope: Envelope<Message, Reply>, actor: Coroutine) -> Bool {
        lock.lock()
        if state.isClosed {
            lock.unlock()
            return false
        }
        // Invariant 4: straight to a waiting actor only past an empty queue.
        if state.count == 0, claimWaiting(actor) {
            handed = envelope   // invariant 5: before the wake-up that publishes it
            lock.unlock()
            actor.wakeClaimed(.completed)
            return true
        }
        _ = state.post(envelope)
        queued.store(state.count, ordering: .sequentiallyConsistent)
        lock.unlock()
        wakeIfWaiting(actor)
        return true
    }

    /// Hands a request's envelope straight to `actor` if it waits in the mailbox with nothing
    /// queued, and makes it ready to run next (``CoroutineScheduler/makeReadyNext(_:)``): the
    /// calling coroutine, on the actor's scheduler, switches straight to it when it suspends.
    /// Returns false, creating no envelope, otherwise. Called on the requester's scheduler thread
    /// after it saw the actor placed on the same scheduler; a pool actor that started elsewhere
    /// meanwhile is still woken correctly, through its own scheduler's incoming queue.
    @inlinable
    func handOff(_ message: Message, requester: Coroutine, epoch: UInt64,
                 slot: UnsafeMutablePointer<Result<Reply, any Error>?>, to actor: Coroutine) -> Bool {
        guard queued.load(ordering: .relaxed) == 0, claimWaiting(actor) else { return false }
        handed = Envelope(message, requester: requester, epoch: epoch, slot: slot, isHandOff: true)
        actor.wakeClaimedNext()
        return true
    }

    /// Claims `actor`'s mailbox wait, if it is in one. Any thread.
    @inlinable @inline(__always)
    func claimWaiting(_ actor: Coroutine) -> Bool {
        let e = actor.epoch.load(ordering: .sequentiallyConsistent)
        return e & 1 == 1 && parkedEpoch.load(ordering: .relaxed) == e && actor.tryClaim(epoch: e)
    }

    /// After a post: wakes `actor` if it waits in the mailbox (invariant 3).
    @usableFromInline
    func wakeIfWaiting(_ actor: Coroutine) {
        if claimWaiting(actor) { actor.wakeClaimed(.completed) }
    }

    /// How many envelopes are queued (a snapshot).
    var count: Int { queued.load(ordering: .relaxed) }

    /// Ends the mailbox: later posts fail, and every queued envelope is rejected with
    /// ``ActorError/terminated``. Idempotent.
    func terminate() {
        lock.lock()
        let drained = state.close()
        queued.store(0, ordering: .relaxed)
        lock.unlock()
        // Nothing is handed to an actor that ended (invariant 6); this only keeps that true for
        // an actor whose last wake-up carried an envelope it never took.
        handed.take()?.fail(ActorError.terminated)
        for envelope in drained { envelope.fail(ActorError.terminated) }
    }
}
