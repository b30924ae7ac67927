/// An actor in the Erlang/Akka style: a coroutine that handles messages from its ``Mailbox`` one
/// at a time and answers each sender through a promise (see <doc:Actors>).
///
/// ```swift
/// enum CounterMessage: Sendable { case add(Int), get }
/// let counter = CoroutineActor<CounterMessage, Int> { mailbox in
///     var total = 0                                   // state owned by the actor's coroutine
///     for envelope in mailbox {
///         switch envelope.message {
///         case .add(let n): total += n; envelope.reply(total)
///         case .get: envelope.reply(total)
///         }
///     }
/// }
/// counter.send(.add(5))
/// let total = try counter.send(.get).await()         // 5
/// ```
///
/// The body runs in its own coroutine. It may suspend while handling a message (await promises,
/// use channels, delay); messages wait in FIFO order meanwhile. Every message is answered
/// exactly once from the sender's point of view: by `reply`/`fail`, by ``ActorError/noReply``
/// if the envelope is dropped unanswered, by the body's error if the body throws while holding
/// it, or by ``ActorError/terminated`` if the actor ended before handling it.
///
/// - Thread-safety: `Sendable`; `send` and `cancel` may be called from any thread.
public final class CoroutineActor<Message: Sendable, Reply: Sendable>: Sendable {
    @usableFromInline let mailbox: Mailbox<Message, Reply>
    /// The actor's coroutine: join it to wait until the body has ended; its ``Coroutine/error``
    /// is what the body threw.
    public let coroutine: Coroutine

    /// Starts an actor whose body handles the messages of its mailbox.
    ///
    /// - Parameters:
    ///   - scheduler: Where the actor's coroutine runs (as for `Coroutine.launch`).
    ///   - body: Iterates the mailbox (`for envelope in mailbox`) and answers each envelope. When
    ///     it returns or throws, the actor has terminated: queued and later messages are rejected
    ///     with ``ActorError/terminated``. An error it throws rejects the envelope in hand and is
    ///     reported like an error of a launched coroutine.
    /// - Suspends: no (the body starts later on the scheduler). Thread-safe. O(1).
    public convenience init(on scheduler: CoroutineScheduler? = nil,
                            _ body: @escaping @Sendable (Mailbox<Message, Reply>) throws -> Void) {
        let (target, pool) = CoroutineScheduler.placement(for: scheduler)
        self.init(on: target, pool: pool, body)
    }

    /// Starts an actor whose coroutine is a pool launch onto `pool` (as
    /// `Coroutine.launch(on: pool)`): it starts on whichever of the pool's schedulers is free
    /// first, and stays there; otherwise as ``init(on:_:)-(CoroutineScheduler?,_)``.
    ///
    /// - Parameters:
    ///   - pool: The pool whose schedulers may run the actor's coroutine.
    ///   - body: as for ``init(on:_:)-(CoroutineScheduler?,_)``.
    /// - Suspends: no (the body starts later on a scheduler of the pool). Thread-safe. O(1)
    ///   amortised.
    public convenience init(on pool: SchedulerPool,
                            _ body: @escaping @Sendable (Mailbox<Message, Reply>) throws -> Void) {
        self.init(on: pool.firstPlacement(), pool: pool, body)
    }

    private init(on scheduler: CoroutineScheduler, pool: SchedulerPool?,
                 _ body: @escaping @Sendable (Mailbox<Message, Reply>) throws -> Void) {
        let mailbox = Mailbox<Message, Reply>()
        self.mailbox = mailbox
        coroutine = Coroutine(scheduler: scheduler, pool: pool, name: "actor",
                              stackSize: nil, reportsUnobservedErrors: true,
                              unstartedObserver: mailbox,
                              body: {
                                  defer { mailbox.terminate() }
                                  do {
                                      try body(mailbox)
                                      mailbox.finishAtEnd()
                                  } catch {
                                      mailbox.inHand?.fail(error)
                                      mailbox.finishAtEnd()
                                      throw error
                                  }
                              })
        mailbox.owner = Unmanaged.passUnretained(coroutine).toOpaque()
        coroutine.startUnderCurrent()
    }

    /// Sends `message` to the actor.
    ///
    /// - Parameter message: The message.
    /// - Returns: A promise of the reply: fulfilled by `reply`, rejected by `fail`, by
    ///   ``ActorError/noReply`` if the actor drops the envelope unanswered, by the body's error if
    ///   it throws while handling it, or by ``ActorError/terminated`` if the actor has ended or
    ///   ends before handling it.
    /// - Suspends: never; callable from any thread, inside or outside a coroutine.
    /// - Complexity: O(1) amortised.
    @inlinable @discardableResult
    public func send(_ message: Message) -> Promise<Reply> {
        let promise = Promise<Reply>()
        let envelope = Envelope(message, promise)
        // Rejected before the envelope is released, whose deinit would say noReply.
        if !mailbox.post(envelope, actor: coroutine) { envelope.fail(ActorError.terminated) }
        return promise
    }

    /// Cancels the actor: its mailbox loop ends at the next iteration (so code after the loop
    /// runs once), the envelope being handled may still be answered, and every other message is
    /// rejected with ``ActorError/terminated``. Idempotent; any thread.
    /// - Suspends: no; throws nothing. Complexity: O(children of the actor's coroutine).
    public func cancel() {
        coroutine.cancel()
    }
}

/// Terminates the mailbox of an actor whose coroutine never ran; resumes a requester waiting
/// directly for the actor when the actor suspends (`Mailbox` invariant 8).
extension Mailbox: UnstartedObserver {
    @usableFromInline
    func coroutineNeverRan(_ error: any Error) { terminate() }

    @usableFromInline
    func coroutineLeavesDirectRequester(_ c: Coroutine) { giveUpDirectRequester(c) }

    @usableFromInline
    func armWaitOwnedByThread(_ c: Coroutine) { armParkedActor(c) }
}
