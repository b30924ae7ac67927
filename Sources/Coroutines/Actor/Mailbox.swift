import CCoroutines
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
//      coroutine may iterate it), before it (or its thread's loop, invariant 12) arms the epoch
//      it names, and reset to 0 if that wait is interrupted or was never armed. The actor's
//      epoch equals `parkedEpoch` exactly while it waits in the mailbox: epochs only grow, so a
//      stale value never matches a later wait (of the body, on a promise, say).
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
//
// ## Direct requests
// A `request` from a coroutine on the actor's own scheduler thread, to an actor idle in this
// mailbox, does not arm a wait of its own: it claims the actor's mailbox wait, hands it the
// envelope and switches straight to it (`requestDirectly`). Its envelope's states are in
// `Envelope.swift`.
//   7. While such a requester waits, the actor's `directRequester` names it, and `direct` names
//      its envelope until the envelope is answered and let go; both are confined to that thread.
//      The mailbox holds the envelope while `direct` names it (in `handed`, then `inHand`):
//      `direct` is cleared before the mailbox lets go of it. `directRequester` set with `direct`
//      nil means: answered.
//   8. The requester is resumed by the actor's thread, at the actor's next suspension or
//      switch to another coroutine (`CoroutineScheduler.switchAway`, `switchDirect`), or at its
//      end:
//      parking in this mailbox with the envelope answered, the actor switches straight back to
//      it; otherwise, answered, it is made ready to run next; not yet answered, it is *given up*
//      (`giveUpDirectRequester`): its wait is armed and published in the envelope, and it is an
//      ordinary waiter from then on — cancellable, woken by the answer. So a requester waits
//      unarmed only while the actor runs without suspending: a cancellation meanwhile takes
//      effect when it is given up, or not at all if the answer comes first (as for any wait
//      completed before the cancellation was seen).
//   9. Bounded, as hand-offs to the front of the run queue are: each direct request takes a turn
//      of its scheduler's hand-off streak and direct budget (`takeDirectTurn`), and each direct
//      switch back one of the direct budget; without one, the ordinary path is taken.
//  10. A direct envelope the actor lets go of (`finishInHand`) while the mailbox holds the only
//      reference of any kind — strong, weak or unowned — is kept in `spare`, answered (`noReply`
//      if the body dropped it unanswered, as its deinit would), and the next direct request
//      reuses it instead of allocating (`Envelope.reuse`). "The only reference" is one atomic
//      load: the envelope's reference-count word equals `freshWord`, the word of a fresh
//      envelope (one strong reference, no unowned, no side table, which any weak reference
//      creates for good), captured from the first one allocated here and checked by the
//      runtime's counts. Counts read one by one would not do: a thread holding only a weak
//      reference could upgrade it and drop the weak one between two reads. At that instant
//      nobody else holds a reference, so nobody can make one, and nothing can observe the
//      reuse. Only for a trivial `Message` (a spare holds no resource of the last message), and
//      not under a sanitizer, which cannot see the runtime's counts order an earlier holder's
//      accesses before the reuse. `spare` and `freshWord` are confined to the actor's thread:
//      written by the actor's coroutine, or by a requester that claimed its wait there.
//  11. Until the body has it, a direct envelope is reachable from this thread alone: the
//      requester made it here (or reused the spare, which nothing else held: invariant 10) and
//      handed it over without publishing it anywhere else. So the reference `inHand` takes when
//      the iterator returns it is added with a plain increment (`ccoro_retain_unshared`): no
//      other thread can change its count meanwhile, and any later hand-off of it to another
//      thread (`Sendable`: through a lock, a channel, an atomic) orders that increment first.
//
// ## Parked unarmed, owned by the thread
//  12. Parking with its direct request answered (invariant 8), the actor may switch back to the
//      requester *without arming its wait*: it is then owned by its scheduler's thread
//      (`CoroutineScheduler.actorOwnedByThread`, one slot per scheduler; with the slot taken, it
//      arms as usual). Its epoch stays even, so to every other thread it looks busy: a post only
//      queues, a cancellation only sets the flag. A coroutine of that thread making a direct
//      request finds it in the slot and takes it with no compare-and-swap (nothing else can
//      resume it), empties the slot and hands it the envelope. Otherwise the loop, as soon as
//      any coroutine gives it the thread back (before stopping, parking or running timers), arms
//      the wait for the actor (`armParkedActor`: the epoch `parkedEpoch` names) and then reads
//      `queued` and the interrupts, waking it if either is set: Dekker's pattern with posters
//      (invariant 3) and with `Coroutine.cancel` (flag, then epoch), as the actor's own wait.
//      So nothing is lost, and nothing waits longer than it would have for the actor's thread:
//      the actor could not run before the loop got the thread back anyway, and the direct
//      budget (invariant 9) bounds how long coroutines switch among themselves without the loop.
//      A direct request finding the actor cancelled (or timed out) does not take it: it takes the
//      ordinary path, and the armed wait delivers the interrupt. Resumed unarmed, the actor
//      resets `parkedEpoch` to 0 before anything can arm it again (invariant 2).

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
    /// The envelope of the requester waiting directly for the actor (invariant 7): unretained,
    /// the mailbox holds it while this is set. Confined to the actor's scheduler thread.
    @usableFromInline @exclusivity(unchecked) var direct: Unmanaged<Envelope<Message, Reply>>?
    /// A direct request's envelope kept for the next (invariant 10), retained by hand: moved
    /// in and out without a retain and release. Confined to the actor's scheduler thread.
    @usableFromInline @exclusivity(unchecked) var spare: Unmanaged<Envelope<Message, Reply>>?
    /// The reference-count word of a fresh envelope (invariant 10); 0 until one is captured.
    /// Confined to the actor's scheduler thread.
    @usableFromInline @exclusivity(unchecked) var freshWord: UInt64 = 0

    init() {}

    /// The spare goes with the mailbox, on whichever thread releases it last: nothing else
    /// refers to it (invariant 10).
    deinit { spare?.release() }

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
            mailbox.finishInHand()   // the previous envelope: released (noReply if unanswered)
            do {
                let envelope = try Coroutine.withCurrent { me in
                    if _slowPath(Unmanaged.passUnretained(me).toOpaque() != mailbox.owner) {
                        fatalError("a Mailbox is iterated only by its actor's coroutine, not by \(me)")
                    }
                    return try mailbox.receive(me)
                }
                if let d = mailbox.direct, d.toOpaque() == Unmanaged.passUnretained(envelope).toOpaque() {
                    // Invariant 11: nothing off this thread can reach it yet.
                    ccoro_retain_unshared(d.toOpaque())
                    mailbox.inHand = d.takeRetainedValue()
                } else {
                    mailbox.inHand = envelope
                }
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
            if queued.load(ordering: .relaxed) > 0 {
                // More to handle before parking: a direct requester runs after this turn.
                if _slowPath(actor.hasDirectRequester) { giveUpDirectRequester(actor) }
                if let envelope = takeQueued() { return envelope }
            }
            // Invariant 2: name the epoch about to be armed (the actor runs, so its epoch is even
            // and only it can arm it).
            let armed = actor.epoch.load(ordering: .relaxed) &+ 1
            parkedEpoch.store(armed, ordering: .relaxed)
            if _slowPath(actor.hasDirectRequester) {
                // Invariant 8: parking with the direct request answered switches straight back
                // (`direct` is nil once `finishInHand` let go of the answered envelope).
                if let d = direct {
                    if d._withUnsafeGuaranteedRef({ $0.state.load(ordering: .acquiring) }) == EnvelopeState.answered {
                        direct = nil
                        actor.switchesBackToRequester = true
                    }
                } else {
                    actor.switchesBackToRequester = true
                }
                if actor.switchesBackToRequester,
                   actor.placement._withUnsafeGuaranteedRef({ $0.actorOwnedByThread == nil }) {
                    // Invariant 12: back to the requester without arming.
                    do {
                        try actor.waitOwnedByThread(.channel)
                    } catch {
                        parkedEpoch.store(0, ordering: .relaxed)
                        giveUpDirectRequester(actor)
                        throw error
                    }
                    parkedEpoch.store(0, ordering: .relaxed)
                    if let envelope = handed.take() { return envelope }
                    continue
                }
            }
            do {
                try actor.wait(.channel, registerEpoch: { epoch in
                    assert(epoch == armed, "internal inconsistency: a mailbox wait armed an unexpected epoch")
                    // Invariant 3: the arm came first; a post this load misses will claim the wait.
                    return queued.load(ordering: .sequentiallyConsistent) > 0
                }, unregister: { _ in })
            } catch {
                // Interrupted, perhaps before `armed` was armed: a later wait may arm it.
                parkedEpoch.store(0, ordering: .relaxed)
                giveUpDirectRequester(actor)
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

    /// Hands a request's message straight to `actor` if it waits in this mailbox, with nothing
    /// queued, on the calling coroutine's own thread, and switches to it without arming a wait
    /// (invariants 7–9). Returns true once the requester is resumed with its answer in `slot`;
    /// returns false, having done nothing, if the actor is not idle here or the scheduler's
    /// hand-off budget is spent: the caller then takes the ordinary path.
    /// - Throws: `CancellationError` or `CoroutineError.timedOut`, if the requester was given up
    ///   and its wait then interrupted.
    @inlinable
    func requestDirectly(_ message: Message, requester me: Coroutine,
                         slot: UnsafeMutablePointer<Result<Reply, any Error>?>, actor: Coroutine) throws -> Bool {
        guard queued.load(ordering: .relaxed) == 0 else { return false }
        let scheduler = me.placement
        if scheduler._withUnsafeGuaranteedRef({ $0.actorOwnedByThread })?.toOpaque()
            == Unmanaged.passUnretained(actor).toOpaque() {
            // Parked unarmed on this thread (invariant 12): nothing else can resume it. An
            // interrupted actor is left to the loop, which arms it and delivers the interrupt.
            scheduler._withUnsafeGuaranteedRef { $0.actorOwnedByThread = nil }
            guard !actor.hasPendingInterrupt,
                  scheduler._withUnsafeGuaranteedRef({ $0.takeDirectTurn() }) else {
                armParkedActor(actor)
                return false
            }
        } else {
            guard claimWaitingHere(actor, scheduler) else { return false }
        }
        // Claimed, or owned: nothing else resumes the actor, so its side of the mailbox is this
        // thread's.
        let envelope: Envelope<Message, Reply>
        if let e = spare {   // invariant 10
            spare = nil
            e._withUnsafeGuaranteedRef { $0.reuse(message, directRequester: me, slot: slot) }
            envelope = e.takeRetainedValue()
        } else {
            envelope = newDirectEnvelope(message, requester: me, slot: slot)
        }
        let u = Unmanaged.passUnretained(envelope)
        direct = u
        handed = consume envelope   // invariant 5: the actor takes it when it resumes
        actor.directRequester = Unmanaged.passUnretained(me)
        let before = me.epoch.load(ordering: .relaxed)
        me.placement._withUnsafeGuaranteedRef { $0.switchDirect(from: me, to: actor) }
        // Resumed: answered, or given up (its epoch moved: armed, then claimed).
        if _slowPath(me.epoch.load(ordering: .relaxed) != before) { try resumeGivenUp(requester: me) }
        return true
    }

    /// For a direct request: claims `actor`'s mailbox wait if it waits, armed, on `scheduler`
    /// (the requester's, so this thread's) and the scheduler grants a direct turn. Out of line,
    /// so that the request inlined into its caller stays small: the actor is usually parked
    /// unarmed here instead (invariant 12).
    @usableFromInline @inline(never)
    func claimWaitingHere(_ actor: Coroutine, _ scheduler: Unmanaged<CoroutineScheduler>) -> Bool {
        let e = actor.epoch.load(ordering: .sequentiallyConsistent)
        // Waiting in this mailbox, the actor has started: its placement is final, and was
        // written before the arm this load saw.
        return e & 1 == 1 && parkedEpoch.load(ordering: .relaxed) == e
            && actor.placement.toOpaque() == scheduler.toOpaque()
            && scheduler._withUnsafeGuaranteedRef({ $0.takeDirectTurn() })
            && actor.tryClaim(epoch: e)
    }

    /// A given-up direct requester, resumed as an ordinary waiter: returns if it was answered,
    /// else throws the interrupt that woke it.
    @usableFromInline
    func resumeGivenUp(requester me: Coroutine) throws {
        switch me.wakeReason {
        case .completed: return
        case .cancelled: throw CancellationError()
        case .timedOut: throw me.timedOutError()
        }
    }

    /// Resumes the requester waiting directly for `actor` (invariant 8): made ready to run next if
    /// its envelope is answered; else armed, published in the envelope and left to the answer, an
    /// ordinary waiter. On the actor's scheduler thread, while the mailbox holds the envelope.
    @usableFromInline
    func giveUpDirectRequester(_ actor: Coroutine) {
        guard let requester = actor.directRequester else { return }
        actor.directRequester = nil
        actor.switchesBackToRequester = false
        guard let u = direct.take() else {
            // Answered: `receive` let go of the envelope as the actor was parking.
            requester._withUnsafeGuaranteedRef { $0.wakeClaimedNext() }
            return
        }
        u._withUnsafeGuaranteedRef { envelope in
            requester._withUnsafeGuaranteedRef { r in
                var s = envelope.state.load(ordering: .acquiring)
                if s == EnvelopeState.unanswered {
                    let (won, now) = envelope.state.compareExchange(expected: s, desired: EnvelopeState.arming,
                                                                    ordering: .acquiringAndReleasing)
                    if won {
                        // Envelope invariant 4: the requester is retained, armed, then published.
                        _ = Unmanaged.passUnretained(r).retain()
                        envelope.retainsRequester = true
                        let e = r.armEpoch()
                        envelope.state.store(e, ordering: .sequentiallyConsistent)
                        // A cancellation while it waited unarmed found nothing to claim. Dekker's
                        // pattern with `Coroutine.cancel` (flag, then epoch; here arm, then flag).
                        if r.hasPendingInterrupt { r.interruptWait(r.isCancelled ? .cancelled : .timedOut) }
                        return
                    }
                    s = now   // answered from another thread meanwhile
                }
                if s == EnvelopeState.answering {
                    let (left, _) = envelope.state.compareExchange(expected: s, desired: EnvelopeState.answeringWakes,
                                                                   ordering: .acquiringAndReleasing)
                    if left { return }   // the answerer wakes it (Envelope invariant 3)
                }
                r.wakeClaimedNext()
            }
        }
    }

    /// Lets go of the envelope the body handled last (at the next iteration, or the body's end).
    /// A direct envelope nobody else holds is answered here (`noReply` if need be), so its
    /// requester is answered, and kept as the spare (invariant 10) or released; one the body
    /// kept settles its direct requester first, while the envelope is surely alive (invariant
    /// 7). Actor's coroutine only.
    @inlinable
    func finishInHand() {
        // Compared without a reference of its own, which would make it look shared.
        if let d = direct, inHand.map({ Unmanaged.passUnretained($0).toOpaque() }) == d.toOpaque() {
            if spare == nil, isOnlyReference(d) {   // invariant 10: answered here, kept
                direct = nil
                if d._withUnsafeGuaranteedRef({ $0.state.load(ordering: .acquiring) }) != EnvelopeState.answered {
                    d._withUnsafeGuaranteedRef { $0.answerNoReply() }
                }
                spare = Unmanaged.passRetained(inHand.take().unsafelyUnwrapped)
                return
            }
            if isKnownUniquelyReferenced(&inHand) {
                // Released now: its deinit answers noReply on this thread.
                direct = nil
                inHand = nil
                return
            }
            if d._withUnsafeGuaranteedRef({ $0.state.load(ordering: .acquiring) }) == EnvelopeState.answered {
                direct = nil
                inHand = nil
                return
            }
            Unmanaged<Coroutine>.fromOpaque(owner.unsafelyUnwrapped)._withUnsafeGuaranteedRef { giveUpDirectRequester($0) }
        }
        inHand = nil
    }

    /// Whether `inHand`'s reference to `envelope` is the only reference of any kind, so that the
    /// envelope may be kept as the spare (invariant 10): one load of its reference-count word.
    @inlinable @inline(__always)
    func isOnlyReference(_ envelope: Unmanaged<Envelope<Message, Reply>>) -> Bool {
        guard _isPOD(Message.self), ccoro_fibers_active == 0, freshWord != 0 else { return false }
        return ccoro_object_refcount_word(envelope.toOpaque()) == freshWord
    }

    /// A new envelope for a direct request, when there is no spare (out of line: the reuse is
    /// the common path); the first one captures `freshWord` (invariant 10).
    @usableFromInline @inline(never)
    func newDirectEnvelope(_ message: Message, requester: Coroutine,
                           slot: UnsafeMutablePointer<Result<Reply, any Error>?>) -> Envelope<Message, Reply> {
        if freshWord == 0 { captureFreshWord(message, requester: requester, slot: slot) }
        return Envelope(message, directRequester: requester, slot: slot)
    }

    /// Captures `freshWord` (invariant 10) from a throwaway envelope held by one `Unmanaged`
    /// reference alone (so in any build, whatever copies the caller's code makes), once the
    /// runtime's counts confirm it: one strong reference, no unowned, no weak. The throwaway is
    /// marked answered before it is released, so that its deinit leaves `slot` alone.
    @usableFromInline
    func captureFreshWord(_ message: Message, requester: Coroutine,
                          slot: UnsafeMutablePointer<Result<Reply, any Error>?>) {
        guard _isPOD(Message.self) else { return }
        let fresh = Unmanaged.passRetained(Envelope<Message, Reply>(message, directRequester: requester, slot: slot))
        let object = fresh.toOpaque()
        if swift_retainCount(object) == 1, swift_unownedRetainCount(object) == 1, swift_weakRetainCount(object) == 1 {
            freshWord = ccoro_object_refcount_word(object)
        }
        fresh._withUnsafeGuaranteedRef { $0.state.store(EnvelopeState.answered, ordering: .relaxed) }
        fresh.release()
    }

    /// Arms the mailbox wait of `actor`, parked unarmed on this thread (invariant 12), for the
    /// loop: the epoch `parkedEpoch` names, then the Dekker reads of `queued` (invariant 3) and
    /// of the interrupts (`Coroutine.cancel` sets its flag, then reads the epoch); wakes it if
    /// either is set. On the actor's scheduler thread, from its loop.
    @usableFromInline
    func armParkedActor(_ actor: Coroutine) {
        let e = actor.armEpoch()
        assert(e == parkedEpoch.load(ordering: .relaxed), "internal inconsistency: an actor parked unarmed named another epoch")
        if queued.load(ordering: .sequentiallyConsistent) > 0 {
            if actor.tryClaim(epoch: e) { actor.wakeClaimed(.completed) }
        } else if actor.hasPendingInterrupt {
            actor.interruptWait(actor.isCancelled ? .cancelled : .timedOut)
        }
    }

    /// The actor's body has ended: lets go of the envelope in hand and resumes a requester still
    /// waiting directly.
    func finishAtEnd() {
        finishInHand()
        if let owner { Unmanaged<Coroutine>.fromOpaque(owner)._withUnsafeGuaranteedRef { giveUpDirectRequester($0) } }
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
