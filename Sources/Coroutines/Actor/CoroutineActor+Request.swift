import Synchronization

/// A request: a message sent and its reply awaited by the sending coroutine in one call, handed
/// off directly when the actor is idle on the caller's own scheduler (see <doc:Actors>).
extension CoroutineActor {
    /// Sends `message` to the actor and suspends the calling coroutine until the actor answers.
    ///
    /// The same contract as `try send(message).await()` — messages are handled one at a time in
    /// the order they arrived; the answer is the reply, the error passed to `fail`,
    /// ``ActorError/noReply``, the body's error or ``ActorError/terminated`` — without a promise.
    ///
    /// **Direct hand-off.** When the actor is idle (waiting for a message) on the caller's own
    /// scheduler, the caller switches straight to the actor's coroutine without arming a wait of
    /// its own, and the actor, once it waits for its next message with the answer given, switches
    /// straight back: no trip through the run queue, as Go's `runnext` slot (runtime `proc.go`).
    /// This is a stated exception to FIFO wake-up order (<doc:ThreadsSchedulersAndCoroutines>):
    /// coroutines already queued run after the round trip. It is bounded: after 32 direct requests
    /// in a row, or 64 switches without a turn of the scheduler's loop, a request takes the
    /// ordinary path, so a requester and an actor answering each other cannot starve the
    /// scheduler. Switching back, the actor stays owned by the thread, its wait unarmed, until
    /// the next direct request from that thread takes it or the scheduler's loop gets the thread
    /// back and arms it: messages and cancellations from other threads reach it then, no later
    /// than it could have run. If the actor suspends while handling the message, switches to another
    /// coroutine or ends, the caller becomes an ordinary waiter then (cancellable, woken by the
    /// answer). To a busy actor, or to one on another scheduler, the message is queued and the
    /// caller woken as for any suspension. (`Mailbox.swift` has the invariants.)
    ///
    /// - Parameter message: The message.
    /// - Returns: The actor's reply.
    /// - Throws: The error the actor answered with (``Envelope/fail(_:)``, or the body's error
    ///   while it held the envelope); ``ActorError/noReply`` if the actor dropped the envelope
    ///   unanswered; ``ActorError/terminated`` if the actor has ended or ends before handling the
    ///   message; ``ActorError/requestFromItself`` when called by the actor's own coroutine;
    ///   `CancellationError` if the caller is (or becomes) cancelled, `CoroutineError.timedOut`
    ///   inside an expiring `withTimeout` — the message stays queued and is still handled, its
    ///   answer dropped (during a direct hand-off, only once the actor has suspended: see
    ///   <doc:Actors>); `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: yes, until the answer; resumes on the caller's own scheduler.
    /// - Complexity: O(1) amortised, plus the actor's handling.
    /// - Thread-safety: any coroutine, on any scheduler.
    @inlinable
    public func request(_ message: Message) throws -> Reply {
        try Coroutine.withCurrent { me in
            if me === coroutine { throw ActorError.requestFromItself }
            try me.checkInterrupts()
            var result: Result<Reply, any Error>?
            try withUnsafeMutablePointer(to: &result) { slot in
                if try mailbox.requestDirectly(message, requester: me, slot: slot, actor: coroutine) { return }
                try me.wait(.actorRequest, registerEpoch: { epoch in
                    let envelope = Envelope(message, requester: me, epoch: epoch, slot: slot)
                    if mailbox.post(envelope, actor: coroutine) { return false }
                    // Terminated: answered here, before the envelope is released (its deinit would
                    // answer noReply).
                    envelope.state.store(EnvelopeState.answered, ordering: .releasing)
                    slot.pointee = .failure(ActorError.terminated)
                    return true
                }, unregister: { _ in
                    // The envelope stays in the mailbox: the actor still handles the message, and
                    // its answer, failing to claim this finished wait, is dropped.
                })
            }
            switch consume result {
            case .success(let reply)?: return reply
            case .failure(let error)?: throw error
            case nil: preconditionFailure("internal inconsistency: an actor request resumed without an answer")
            }
        }
    }
}
