/// Errors thrown by ``Channel`` operations.
public enum ChannelError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The channel is closed: a send (or `trySend`, or a `select` send case) on a closed channel,
    /// a sender that was blocked when the channel closed (its value was not delivered), or a
    /// receive on a channel that is closed and drained.
    case closed

    /// What happened and what to do about it.
    public var description: String {
        switch self {
        case .closed: "the channel is closed; no value can be sent, and receivers get nothing once it is drained"
        }
    }
}
