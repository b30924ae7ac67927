import Synchronization

/// A message sent to a ``CoroutineActor``, with the means to answer its sender.
///
/// The first ``reply(_:)`` or ``fail(_:)`` answers the sender; later answers are ignored. If the
/// envelope is released without an answer, the sender gets ``ActorError/noReply`` — a sender
/// never waits forever for a dropped message.
///
/// The sender is one of two kinds (invariant: exactly one of `promise` and `requester` is set):
/// - a promise, for ``CoroutineActor/send(_:)``: the answer settles it;
/// - a suspended coroutine, for ``CoroutineActor/request(_:)``: the answer claims its wait
///   (a compare-and-swap of its epoch, as `WaitTicket.tryClaim()`), then writes the result into `slot` — a variable in the
///   requester's frame, on its stack — and makes it ready (after a direct hand-off to the idle
///   actor: next, on its own scheduler's thread, `CoroutineScheduler.makeReadyNext(_:)`; else as
///   any wake-up). The slot is written only after a successful
///   claim, while the requester cannot run, so a requester that was cancelled meanwhile (its
///   claim won by the canceller, its frame gone) is never written to: that answer is dropped.
///
/// - Thread-safety: `Sendable`; it may be answered from any thread (for example after the actor
///   handed it to other work).
public final class Envelope<Message: Sendable, Reply: Sendable>: Sendable {
    /// The message.
    public let message: Message
    @usableFromInline let promise: Promise<Reply>?
    /// The waiting coroutine of a `request`, retained by the envelope (released by its deinit):
    /// an `Unmanaged` reference, so that answering borrows it without retaining it again.
    @usableFromInline let requester: Unmanaged<Coroutine>?
    /// The epoch of the requester's wait (see ``WaitTicket``).
    @usableFromInline let requesterEpoch: UInt64
    @usableFromInline nonisolated(unsafe) let slot: UnsafeMutablePointer<Result<Reply, any Error>?>?
    /// Whether the message was handed straight to the idle actor (`Mailbox.handOff`), so that its
    /// answer, too, goes to the front of the requester's run queue; a queued message's answer
    /// wakes the requester as any suspension.
    @usableFromInline let isHandOff: Bool
    /// Set by the first answer, so that releasing an answered envelope does no generic work, and
    /// so that a request is answered once.
    @usableFromInline let answered = Atomic<Bool>(false)

    @inlinable
    init(_ message: Message, _ promise: Promise<Reply>) {
        self.message = message
        self.promise = promise
        requester = nil
        requesterEpoch = 0
        slot = nil
        isHandOff = false
    }

    /// An envelope of ``CoroutineActor/request(_:)``: the answer goes to `slot` and wakes the
    /// wait of `requester` armed at `epoch`. `isHandOff`: see ``isHandOff``.
    @inlinable
    init(_ message: Message, requester: Coroutine, epoch: UInt64,
         slot: UnsafeMutablePointer<Result<Reply, any Error>?>, isHandOff: Bool) {
        self.message = message
        promise = nil
        self.requester = Unmanaged.passRetained(requester)
        requesterEpoch = epoch
        self.slot = slot
        self.isHandOff = isHandOff
    }

    deinit {
        if !answered.load(ordering: .acquiring) { answerNoReply() }
        requester?.release()
    }

    /// Out of line: the deinit of this generic class is never specialised, and the generic types
    /// that answering touches (`Result<Reply, any Error>`) would have their metadata looked up at
    /// every release, answered or not (a hash-table lookup: `send(_:).await()` took 25 % longer).
    @inline(never)
    func answerNoReply() {
        answer(.failure(ActorError.noReply))   // does nothing if answered otherwise
    }

    /// Answers the sender with `reply` (ignored after the first answer).
    /// - Suspends: no. Any thread. O(waiters of the promise), O(1) for a request.
    @inlinable
    public func reply(_ reply: Reply) {
        if let promise {   // send's envelope: the promise, as directly as before requests existed
            promise.fulfill(reply)
            answered.store(true, ordering: .releasing)
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
            answered.store(true, ordering: .releasing)
            return
        }
        answer(.failure(error))
    }

    /// Whether the envelope has been answered (or its sender's promise otherwise settled).
    public var isAnswered: Bool {
        if let promise { return !promise.isPending }
        return answered.load(ordering: .acquiring)
    }

    @inlinable
    func answer(_ result: Result<Reply, any Error>) {
        if let promise {
            switch result {
            case .success(let r): promise.fulfill(r)
            case .failure(let e): promise.reject(e)
            }
            answered.store(true, ordering: .releasing)
            return
        }
        // A request: the first answer only; then the requester, if it still waits.
        guard !answered.exchange(true, ordering: .acquiringAndReleasing), let requester else { return }
        // Borrowed: this envelope holds the requester until it is released.
        requester._withUnsafeGuaranteedRef { coroutine in
            guard coroutine.tryClaim(epoch: requesterEpoch) else { return }
            slot.unsafelyUnwrapped.pointee = result
            if isHandOff {
                coroutine.wakeClaimedNext()
            } else {
                coroutine.wakeClaimed(.completed)
            }
        }
    }
}
