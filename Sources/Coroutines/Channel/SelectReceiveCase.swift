/// The typed payload of a select's receive case: the channel and the body. The received value
/// is written into the slot that follows the payload in the same block
/// (``SelectPayloadLayout``), by `poll` or by the sender that completes the waiting case.
///
/// ``operate(_:_:_:)`` is the case's ``SelectCase/Operation``.
@usableFromInline
struct SelectReceiveCase<Element, Outcome> {
    @usableFromInline typealias Layout = SelectPayloadLayout<Self, Element>

    @usableFromInline let storage: ChannelStorage<Element>
    @usableFromInline let body: (Element?) throws -> Outcome

    @inlinable
    init(storage: ChannelStorage<Element>, body: @escaping (Element?) throws -> Outcome) {
        self.storage = storage
        self.body = body
    }

    /// Performs `step` of the receive case `selectCase` (see ``SelectCase/Step``).
    @inlinable
    static func operate(_ step: SelectCase.Step, _ selectCase: UnsafeMutablePointer<SelectCase>,
                        _ argument: UnsafeMutableRawPointer?) throws -> Bool {
        let base = selectCase.pointee.payload
        let payload = base.assumingMemoryBound(to: Self.self)
        let slot = (base + Layout.elementOffset).assumingMemoryBound(to: Element.self)
        // The payload holds the channel alive: borrow it without reference counting.
        let storage = Unmanaged<ChannelStorage<Element>>.fromOpaque(selectCase.pointee.channel)
        switch step {
        case .poll:
            return storage._withUnsafeGuaranteedRef { storage in
                switch storage.state.receive() {
                case .value(let v, let sender):
                    slot.initialize(to: v)
                    selectCase.pointee.peer = sender
                    return true
                case .closed:
                    selectCase.pointee.closedAtPoll = true
                    return true
                case .empty:
                    return false
                }
            }
        case .enqueue:
            let wait = argument.unsafelyUnwrapped.assumingMemoryBound(to: SelectCase.Wait.self)
            storage._withUnsafeGuaranteedRef { storage in
                storage.state.receivers.append(ChannelWaiter(ticket: wait.pointee.ticket,
                                                             element: UnsafeMutableRawPointer(slot),
                                                             outcome: wait.pointee.outcome,
                                                             caseIndex: wait.pointee.caseIndex))
            }
        case .withdraw:
            let wait = argument.unsafelyUnwrapped.assumingMemoryBound(to: SelectCase.Wait.self)
            storage._withUnsafeGuaranteedRef { $0.withdrawReceiver(wait.pointee.ticket) }
        case .finish:
            let result = argument.unsafelyUnwrapped.assumingMemoryBound(to: Outcome.self)
            result.initialize(to: try payload.pointee.body(slot.move()))
        case .finishClosed:
            let result = argument.unsafelyUnwrapped.assumingMemoryBound(to: Outcome.self)
            result.initialize(to: try payload.pointee.body(nil))
        case .destroy:
            payload.deinitialize(count: 1)   // the slot holds no value: `finish` moved it out
        }
        return true
    }
}
