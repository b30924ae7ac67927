/// The typed payload of a select's send case: the channel and the body. The value to send
/// follows the payload in the same block (``SelectPayloadLayout``) and stays there for the
/// whole select: a waiting case publishes its address, and the receiver that completes the case
/// copies it under the channel's lock. It is destroyed with the case, whether it was sent or not.
///
/// ``operate(_:_:_:)`` is the case's ``SelectCase/Operation``.
@usableFromInline
struct SelectSendCase<Element, Outcome> {
    @usableFromInline typealias Layout = SelectPayloadLayout<Self, Element>

    @usableFromInline let storage: ChannelStorage<Element>
    @usableFromInline let body: () throws -> Outcome

    @inlinable
    init(storage: ChannelStorage<Element>, body: @escaping () throws -> Outcome) {
        self.storage = storage
        self.body = body
    }

    /// Performs `step` of the send case `selectCase` (see ``SelectCase/Step``).
    @inlinable
    static func operate(_ step: SelectCase.Step, _ selectCase: UnsafeMutablePointer<SelectCase>,
                        _ argument: UnsafeMutableRawPointer?) throws -> Bool {
        let base = selectCase.pointee.payload
        let payload = base.assumingMemoryBound(to: Self.self)
        let value = (base + Layout.elementOffset).assumingMemoryBound(to: Element.self)
        // The payload holds the channel alive: borrow it without reference counting.
        let storage = Unmanaged<ChannelStorage<Element>>.fromOpaque(selectCase.pointee.channel)
        switch step {
        case .poll:
            return storage._withUnsafeGuaranteedRef { storage in
                switch storage.state.send(value.pointee) {
                case .delivered(let receiver):
                    selectCase.pointee.peer = receiver
                    return true
                case .buffered:
                    return true
                case .closed:
                    selectCase.pointee.closedAtPoll = true
                    return true
                case .full:
                    return false
                }
            }
        case .enqueue:
            let wait = argument.unsafelyUnwrapped.assumingMemoryBound(to: SelectCase.Wait.self)
            storage._withUnsafeGuaranteedRef { storage in
                storage.state.senders.append(ChannelWaiter(ticket: wait.pointee.ticket,
                                                           element: UnsafeMutableRawPointer(value),
                                                           outcome: wait.pointee.outcome,
                                                           caseIndex: wait.pointee.caseIndex))
            }
        case .withdraw:
            let wait = argument.unsafelyUnwrapped.assumingMemoryBound(to: SelectCase.Wait.self)
            storage._withUnsafeGuaranteedRef { $0.withdrawSender(wait.pointee.ticket) }
        case .finish:
            let result = argument.unsafelyUnwrapped.assumingMemoryBound(to: Outcome.self)
            result.initialize(to: try payload.pointee.body())
        case .finishClosed:
            throw ChannelError.closed
        case .destroy:
            value.deinitialize(count: 1)
            payload.deinitialize(count: 1)
        }
        return true
    }
}
