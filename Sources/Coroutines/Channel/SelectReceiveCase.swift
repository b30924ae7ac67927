/// The operations of a select's receive case, for a channel of `Element` and a select of
/// `Outcome`. The case's block holds the body closure and then the slot that the received value
/// is written into, by `poll` or by the sender that completes the waiting case
/// (``SelectBlockLayout``).
///
/// ``operate(_:_:_:)`` is the case's ``SelectCase/Operation``.
@usableFromInline
enum SelectReceiveCase<Element: Sendable, Outcome> {
    @usableFromInline typealias Body = (Element?) throws -> Outcome
    @usableFromInline typealias Layout = SelectBlockLayout<Body, Element>

    /// Performs `step` of the receive case `selectCase` (see ``SelectCase/Step``).
    @inlinable
    static func operate(_ step: SelectCase.Step, _ selectCase: UnsafeMutablePointer<SelectCase>,
                        _ argument: UnsafeMutableRawPointer?) throws -> Bool {
        let body = selectCase.pointee.body.assumingMemoryBound(to: Body.self)
        let slot = selectCase.pointee.element.assumingMemoryBound(to: Element.self)
        // The case holds the channel alive: borrow it without reference counting.
        let channel = Unmanaged<Channel<Element>>.fromOpaque(selectCase.pointee.channel)
        switch step {
        case .poll:
            let polled = argument.unsafelyUnwrapped.assumingMemoryBound(to: SelectCase.Polled.self)
            return channel._withUnsafeGuaranteedRef { channel in
                switch channel.state.receive() {
                case .value(let v, let sender):
                    slot.initialize(to: v)
                    polled.pointee.peer = sender
                    return true
                case .closed:
                    polled.pointee.closed = true
                    return true
                case .empty:
                    return false
                }
            }
        case .enqueue:
            let record = argument.unsafelyUnwrapped.assumingMemoryBound(to: ChannelWaiter.self)
            channel._withUnsafeGuaranteedRef { $0.state.receivers.append(record) }
        case .withdraw:
            let record = argument.unsafelyUnwrapped.assumingMemoryBound(to: ChannelWaiter.self)
            channel._withUnsafeGuaranteedRef { $0.withdrawReceiver(record) }
        case .finish:
            let result = argument.unsafelyUnwrapped.assumingMemoryBound(to: Outcome.self)
            result.initialize(to: try body.pointee(slot.move()))
        case .finishClosed:
            let result = argument.unsafelyUnwrapped.assumingMemoryBound(to: Outcome.self)
            result.initialize(to: try body.pointee(nil))
        case .destroy:
            body.deinitialize(count: 1)   // the slot holds no value: `finish` moved it out
        }
        return true
    }
}
