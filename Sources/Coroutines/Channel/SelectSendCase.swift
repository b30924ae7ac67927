/// The operations of a select's send case, for a channel of `Element` and a select of
/// `Outcome`. The case's block holds the body closure and then the value to send
/// (``SelectBlockLayout``), which stays there for the whole select: a waiting case publishes
/// its address, and the receiver that completes the case copies it under the channel's lock.
/// It is destroyed with the case, whether it was sent or not.
///
/// ``operate(_:_:_:)`` is the case's ``SelectCase/Operation``.
@usableFromInline
enum SelectSendCase<Element: Sendable, Outcome> {
    @usableFromInline typealias Body = () throws -> Outcome
    @usableFromInline typealias Layout = SelectBlockLayout<Body, Element>

    /// Performs `step` of the send case `selectCase` (see ``SelectCase/Step``).
    @inlinable
    static func operate(_ step: SelectCase.Step, _ selectCase: UnsafeMutablePointer<SelectCase>,
                        _ argument: UnsafeMutableRawPointer?) throws -> Bool {
        let body = selectCase.pointee.body.assumingMemoryBound(to: Body.self)
        let value = selectCase.pointee.element.assumingMemoryBound(to: Element.self)
        // The case holds the channel alive: borrow it without reference counting.
        let channel = Unmanaged<Channel<Element>>.fromOpaque(selectCase.pointee.channel)
        switch step {
        case .poll:
            let polled = argument.unsafelyUnwrapped.assumingMemoryBound(to: SelectCase.Polled.self)
            return channel._withUnsafeGuaranteedRef { channel in
                switch channel.state.send(value.pointee) {
                case .delivered(let receiver):
                    polled.pointee.peer = receiver
                    return true
                case .buffered:
                    return true
                case .closed:
                    polled.pointee.closed = true
                    return true
                case .full:
                    return false
                }
            }
        case .enqueue:
            let record = argument.unsafelyUnwrapped.assumingMemoryBound(to: ChannelWaiter.self)
            channel._withUnsafeGuaranteedRef { $0.state.senders.append(record) }
        case .withdraw:
            let record = argument.unsafelyUnwrapped.assumingMemoryBound(to: ChannelWaiter.self)
            channel._withUnsafeGuaranteedRef { $0.withdrawSender(record) }
        case .finish:
            let result = argument.unsafelyUnwrapped.assumingMemoryBound(to: Outcome.self)
            result.initialize(to: try body.pointee())
        case .finishClosed:
            throw ChannelError.closed
        case .destroy:
            value.deinitialize(count: 1)
            body.deinitialize(count: 1)
        }
        return true
    }
}
