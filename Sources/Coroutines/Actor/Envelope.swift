import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// How an envelope is answered (see <doc:Actors>).
//
// The sender is one of two kinds: a promise (`CoroutineActor.send`) or a suspended coroutine
// (`CoroutineActor.request`), the *requester*, whose answer is written into `slot`, a variable in
// the requester's frame. `state` is one atomic word:
//
//   unanswered (0)     nobody has answered. For a request: the requester waits *directly* — it
//                      handed the message to the idle actor on its own thread and switched to it
//                      without arming a wait (`Mailbox.requestDirectly`); only that thread resumes
//                      it (`Mailbox` invariants 7-9).
//   odd e              a request whose requester waits armed at epoch `e` (a queued request, or a
//                      direct one the actor's thread gave up: `Mailbox.giveUpDirectRequester`).
//   answered (2)       answered; later answers are ignored.
//   answering (4)      an answer from another thread is writing `slot` of a direct requester.
//   answeringWakes (6) the same, and the actor's thread has given the requester up meanwhile:
//                      the answerer wakes it when the slot is written.
//   arming (8)         the actor's thread is giving the requester up: retaining it, arming its
//                      wait, then storing the armed epoch. An answer from another thread waits
//                      for that store (a few instructions of the actor's thread).
//
// Invariants:
//   1. Exactly one answer leaves `unanswered` or an odd state (compare-and-swap); it alone writes
//      `slot`, and it writes it only while the requester cannot run: after claiming the armed
//      epoch `e` (a requester woken by a canceller is never written to), or while the requester
//      waits directly (unarmed: nothing but its actor's thread or this answer resumes it).
//   2. On the requester's own thread, `unanswered` goes straight to `answered`: the only other
//      party that moves it, the actor's thread giving the requester up, is this thread.
//   3. From another thread, `unanswered` goes through `answering`, so that the actor's thread,
//      finding it there, leaves the wake-up to the answerer (`answeringWakes`) instead of arming
//      a wait that a canceller could claim while the slot is being written.
//   4. The actor's thread arms a given-up requester only from `arming`, which no answer leaves:
//      so no armed epoch exists while an answer writes the slot, and once the epoch is published
//      the requester is retained by the envelope (as a queued request's), since a canceller may
//      then resume it, and it may end, before the answer claims it.

/// A message sent to a ``CoroutineActor``, with the means to answer its sender.
///
/// The first ``reply(_:)`` or ``fail(_:)`` answers the sender; later answers are ignored. If the
/// envelope is released without an answer, the sender gets ``ActorError/noReply`` — a sender
/// never waits forever for a dropped message.
///
/// - Thread-safety: `Sendable`; it may be answered from any thread (for example after the actor
///   handed it to other work).
public final class Envelope<Message: Sendable, Reply: Sendable>: @unchecked Sendable {
    // Thread-safety: the fields other than `state` are written before the envelope is handed to
    // the actor and only read afterwards, except `retainsRequester`, set by the actor's thread
    // before it publishes an armed epoch (invariant 4) and read by the deinit; and except a spare
    // envelope's `message`, `requester` and `slot`, written again by `reuse` while the mailbox
    // holds the only reference of any kind (`Mailbox` invariant 10).

    /// The message.
    @inlinable public var message: Message { storedMessage }
    @usableFromInline @exclusivity(unchecked) var storedMessage: Message
    @usableFromInline let promise: Promise<Reply>?
    /// The requester of a `request`; answering borrows it. Retained by the envelope if
    /// `retainsRequester` (a queued request: the requester may be cancelled and end while the
    /// message waits). A direct requester is not: it cannot end before it is resumed.
    @usableFromInline @exclusivity(unchecked) var requester: Unmanaged<Coroutine>?
    @usableFromInline @exclusivity(unchecked) var retainsRequester: Bool
    @usableFromInline @exclusivity(unchecked) var slot: UnsafeMutablePointer<Result<Reply, any Error>?>?
    /// Whether the message was handed straight to the idle actor on the requester's thread, so
    /// that an answer to its requester, once given up and armed, wakes it at the front of the run
    /// queue (``CoroutineScheduler/makeReadyNext(_:)``).
    @usableFromInline let isHandOff: Bool
    /// See the states at the top of this file.
    @usableFromInline let state = Atomic<UInt64>(EnvelopeState.unanswered)

    @inlinable
    init(_ message: Message, _ promise: Promise<Reply>) {
        storedMessage = message
        self.promise = promise
        requester = nil
        retainsRequester = false
        slot = nil
        isHandOff = false
    }

    /// An envelope of ``CoroutineActor/request(_:)`` whose requester waits armed at `epoch`: the
    /// answer claims that epoch, writes `slot` and wakes it.
    @inlinable
    init(_ message: Message, requester: Coroutine, epoch: UInt64,
         slot: UnsafeMutablePointer<Result<Reply, any Error>?>) {
        storedMessage = message
        promise = nil
        self.requester = Unmanaged.passRetained(requester)
        retainsRequester = true
        self.slot = slot
        isHandOff = false
        state.store(epoch, ordering: .relaxed)
    }

    /// An envelope of a direct request: its requester waits unarmed (`Mailbox` invariant 7), and
    /// the envelope does not retain it.
    @inlinable
    init(_ message: Message, directRequester: Coroutine, slot: UnsafeMutablePointer<Result<Reply, any Error>?>) {
        storedMessage = message
        promise = nil
        requester = Unmanaged.passUnretained(directRequester)
        retainsRequester = false
        self.slot = slot
        isHandOff = true
    }

    /// Readies a spare envelope of a direct request, answered and held by nothing but its
    /// mailbox, for the next direct request (`Mailbox` invariant 10): as
    /// `init(_:directRequester:slot:)` would, without allocating.
    @inlinable
    func reuse(_ message: Message, directRequester: Coroutine, slot: UnsafeMutablePointer<Result<Reply, any Error>?>) {
        storedMessage = message
        requester = Unmanaged.passUnretained(directRequester)
        self.slot = slot
        state.store(EnvelopeState.unanswered, ordering: .relaxed)
    }

    deinit {
        if !EnvelopeState.isDecided(state.load(ordering: .acquiring)) { answerNoReply() }
        if retainsRequester { requester?.release() }
    }

    /// Out of line: the deinit of this generic class is never specialised, and the generic types
    /// that answering touches (`Result<Reply, any Error>`) would have their metadata looked up at
    /// every release, answered or not (a hash-table lookup: `send(_:).await()` took 25 % longer).
    @usableFromInline @inline(never)
    func answerNoReply() {
        answer(.failure(ActorError.noReply))   // does nothing if answered otherwise
    }

    /// Answers the sender with `reply` (ignored after the first answer).
    /// - Suspends: no. Any thread. O(waiters of the promise), O(1) for a request.
    @inlinable
    public func reply(_ reply: Reply) {
        if let promise {   // send's envelope: the promise, as directly as before requests existed
            promise.fulfill(reply)
            state.store(EnvelopeState.answered, ordering: .releasing)
            return
        }
        answer(.success(reply))
    }

    /// Answers the sender with `error` (ignored after the first answer).
    /// - Suspends: no. Any thread. O(waiters of the promise), O(1) for a request.
    @inlinable
    public func fail(_ error: any Error) {
        if let promise {
            promise.reject(error)
            state.store(EnvelopeState.answered, ordering: .releasing)
            return
        }
        answer(.failure(error))
    }

    /// Whether the envelope has been answered (or its sender's promise otherwise settled).
    public var isAnswered: Bool {
        if let promise { return !promise.isPending }
        return EnvelopeState.isDecided(state.load(ordering: .acquiring))
    }

    @inlinable
    func answer(_ result: Result<Reply, any Error>) {
        if let promise {
            switch result {
            case .success(let r): promise.fulfill(r)
            case .failure(let e): promise.reject(e)
            }
            state.store(EnvelopeState.answered, ordering: .releasing)
            return
        }
        guard let requester else { return }
        var s = state.load(ordering: .acquiring)
        while true {
            if s & 1 == 1 {
                // Armed at `s` (invariant 1): take the answer, then the requester's wait.
                let (won, now) = state.compareExchange(expected: s, desired: EnvelopeState.answered,
                                                       ordering: .acquiringAndReleasing)
                guard won else { s = now; continue }
                requester._withUnsafeGuaranteedRef { coroutine in
                    guard coroutine.tryClaim(epoch: s) else { return }   // cancelled: dropped
                    slot.unsafelyUnwrapped.pointee = result
                    if isHandOff {
                        coroutine.wakeClaimedNext()
                    } else {
                        coroutine.wakeClaimed(.completed)
                    }
                }
                return
            }
            if s == EnvelopeState.arming {
                // Invariant 4: the actor's thread is a few instructions from storing the epoch.
                sched_yield()
                s = state.load(ordering: .acquiring)
                continue
            }
            guard s == EnvelopeState.unanswered else { return }   // answered already
            if requester._withUnsafeGuaranteedRef({ $0.placement._withUnsafeGuaranteedRef { $0.isOnOwnThread } }) {
                // Invariant 2: nothing on this thread resumes the requester until this returns.
                let (won, now) = state.compareExchange(expected: s, desired: EnvelopeState.answered,
                                                       ordering: .acquiringAndReleasing)
                guard won else { s = now; continue }
                slot.unsafelyUnwrapped.pointee = result
                return
            }
            answerFromAnotherThread(result)
            return
        }
    }

    /// Invariant 3: answers a direct requester from a thread other than its own.
    @usableFromInline @inline(never)
    func answerFromAnotherThread(_ result: Result<Reply, any Error>) {
        let (won, _) = state.compareExchange(expected: EnvelopeState.unanswered, desired: EnvelopeState.answering,
                                             ordering: .acquiringAndReleasing)
        guard won else {
            // Given up and armed, or answered, meanwhile: start again from the new state.
            return answer(result)
        }
        slot.unsafelyUnwrapped.pointee = result
        let (done, _) = state.compareExchange(expected: EnvelopeState.answering, desired: EnvelopeState.answered,
                                              ordering: .acquiringAndReleasing)
        if !done {
            // `answeringWakes`: the actor's thread gave the requester up, unarmed, to this answer.
            state.store(EnvelopeState.answered, ordering: .releasing)
            requester.unsafelyUnwrapped._withUnsafeGuaranteedRef { $0.wakeClaimed(.completed) }
        }
    }
}

/// The values of ``Envelope``'s `state` word (see the top of `Envelope.swift`); an odd value is
/// the armed epoch of a waiting requester.
@usableFromInline
enum EnvelopeState {
    // Computed, not stored: a stored static is checked for initialisation at each use.
    @inlinable static var unanswered: UInt64 { 0 }
    @inlinable static var answered: UInt64 { 2 }
    @inlinable static var answering: UInt64 { 4 }
    @inlinable static var answeringWakes: UInt64 { 6 }
    @inlinable static var arming: UInt64 { 8 }

    /// Whether an answer has been chosen (it may still be being written).
    @inlinable
    static func isDecided(_ s: UInt64) -> Bool { s == answered || s == answering || s == answeringWakes }
}
