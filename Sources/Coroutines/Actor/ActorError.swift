/// Errors with which a ``CoroutineActor``'s replies are rejected by the library itself (the promise
/// of ``CoroutineActor/send(_:)``, or ``CoroutineActor/request(_:)``'s throw).
public enum ActorError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The actor released the message's envelope without calling `reply` or `fail`.
    case noReply
    /// The actor had finished or was cancelled: the message was never handled.
    case terminated
    /// The actor's own coroutine called ``CoroutineActor/request(_:)`` on itself: it would wait
    /// for ever for a reply only it could give.
    case requestFromItself

    /// What happened and what to do about it.
    public var description: String {
        switch self {
        case .noReply: "the actor dropped the message without replying; call envelope.reply(_:) or envelope.fail(_:)"
        case .terminated: "the actor has finished or was cancelled, so the message was never handled"
        case .requestFromItself: "an actor called request(_:) on itself, which would wait for ever; handle the message directly, or send(_:) it without awaiting the reply"
        }
    }
}
