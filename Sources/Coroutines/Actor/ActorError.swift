/// Errors with which a ``CoroutineActor``'s reply promises are rejected by the library itself.
public enum ActorError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The actor released the message's envelope without calling `reply` or `fail`.
    case noReply
    /// The actor had finished or was cancelled: the message was never handled.
    case terminated

    /// What happened and what to do about it.
    public var description: String {
        switch self {
        case .noReply: "the actor dropped the message without replying; call envelope.reply(_:) or envelope.fail(_:)"
        case .terminated: "the actor has finished or was cancelled, so the message was never handled"
        }
    }
}
