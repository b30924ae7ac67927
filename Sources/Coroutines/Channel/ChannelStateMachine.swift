/// The state of one channel and its transitions, as a pure struct (<doc:ChannelsAndSelect>; Go
/// runtime `chan.go`). The ``Channel`` holds it with the lock that guards it, and wakes coroutines
/// after unlocking (`Channel+Storage.swift`).
///
/// ## Invariants (checked in debug builds)
/// - `buffer.count <= capacity`.
/// - Receivers wait only while the buffer is empty: `!receivers.isEmpty` implies `buffer.isEmpty`.
/// - Senders wait only while the buffer is full: `!senders.isEmpty` implies
///   `buffer.count == capacity`.
/// - At least one of `senders` and `receivers` is empty, except while one `select` waits with a
///   send case and a receive case on the same channel (it cannot pair with itself), or while
///   a queue holds waiters that were already claimed elsewhere (stale; they are skipped).
/// - Once `isClosed`, no waiter is queued and no value is ever added to the buffer.
///
/// Every transition that hands a value to or takes one from a waiter first claims the waiter's
/// ticket (`tryClaim`): a waiter that was cancelled, timed out, or whose `select` already won
/// elsewhere fails the claim and is dropped, so a value is never given to, or taken from, a wait
/// that has ended (see <doc:Cancellation> and <doc:ChannelsAndSelect>).
@usableFromInline
struct ChannelStateMachine<Element> {
    @usableFromInline var buffer: RingBuffer<Element>
    @usableFromInline let capacity: Int
    @usableFromInline var senders = ChannelWaitQueue()
    @usableFromInline var receivers = ChannelWaitQueue()
    @usableFromInline var isClosed = false
    @usableFromInline var closeError: (any Error)?

    @inlinable
    init(capacity: Int) {
        self.capacity = capacity
        buffer = RingBuffer(capacity: Swift.min(capacity, 16))
    }

    /// What a send did.
    @usableFromInline
    enum SendAction {
        /// Handed to a waiting receiver, whose ticket was claimed: wake it after unlocking.
        case delivered(ClaimedCoroutine)
        /// Stored in the buffer.
        case buffered
        /// The channel is closed: the value was not taken.
        case closed
        /// No room and no waiting receiver: the value was not taken.
        case full
    }

    /// What a receive did.
    @usableFromInline
    enum ReceiveAction {
        /// A value; if a blocked sender was claimed (its value moved), wake it after unlocking.
        case value(Element, wake: ClaimedCoroutine?)
        /// Closed and drained: receivers get this error (`ChannelError.closed` or the close error).
        case closed(any Error)
        /// Nothing to receive now.
        case empty
    }

    /// Offers `value`: to the first receiver still waiting, else to the buffer.
    @inlinable
    mutating func send(_ value: Element) -> SendAction {
        receivers.prefetchHead()
        if isClosed { return .closed }
        while let r = receivers.popFirst() {
            guard r.pointee.tryClaim() else { continue }
            r.pointee.element.assumingMemoryBound(to: Element.self).initialize(to: value)
            r.pointee.outcome.pointee.caseIndex = r.pointee.caseIndex
            return .delivered(ClaimedCoroutine(r.pointee.coroutine))
        }
        if buffer.count < capacity {
            buffer.append(value)
            return .buffered
        }
        return .full
    }

    /// Takes the oldest value: from the buffer (refilled from the first blocked sender), else
    /// directly from the first blocked sender.
    @inlinable
    mutating func receive() -> ReceiveAction {
        senders.prefetchHead()
        if !buffer.isEmpty, let v = buffer.popFirst() {   // the check inline: rendezvous channels skip a call
            while let s = senders.popFirst() {
                guard s.pointee.tryClaim() else { continue }
                buffer.append(s.pointee.element.assumingMemoryBound(to: Element.self).pointee)
                s.pointee.outcome.pointee.caseIndex = s.pointee.caseIndex
                return .value(v, wake: ClaimedCoroutine(s.pointee.coroutine))
            }
            return .value(v, wake: nil)
        }
        while let s = senders.popFirst() {
            guard s.pointee.tryClaim() else { continue }
            let v = s.pointee.element.assumingMemoryBound(to: Element.self).pointee
            s.pointee.outcome.pointee.caseIndex = s.pointee.caseIndex
            return .value(v, wake: ClaimedCoroutine(s.pointee.coroutine))
        }
        return isClosed ? .closed(receiveError) : .empty
    }

    /// Closes the channel. Claims every waiter and marks its outcome closed.
    ///
    /// Allocates nothing under the lock: the claimed records are chained through their `next`
    /// links, off every queue (so `contains` is false for them). A claimed record stays valid
    /// until its coroutine is made ready, which only the caller does, after unlocking.
    /// - Returns: false if it was already closed; else true and the first claimed record
    ///   (receivers first, then senders, each in FIFO order), or nil if none waited.
    @inlinable
    mutating func close(error: (any Error)?) -> (closed: Bool, woken: UnsafeMutablePointer<ChannelWaiter>?) {
        if isClosed { return (false, nil) }
        isClosed = true
        closeError = error
        var first: UnsafeMutablePointer<ChannelWaiter>?
        var last: UnsafeMutablePointer<ChannelWaiter>?
        while let w = receivers.popFirst() ?? senders.popFirst() {
            guard w.pointee.tryClaim() else { continue }
            w.pointee.outcome.pointee.closed = true
            w.pointee.outcome.pointee.caseIndex = w.pointee.caseIndex
            if let last { last.pointee.next = w } else { first = w }
            last = w
        }
        assertInvariants()
        return (true, first)
    }

    /// The error receivers get once the channel is closed and drained.
    @inlinable
    var receiveError: any Error { closeError ?? ChannelError.closed }

    @inlinable
    func assertInvariants() {
        assert(buffer.count <= capacity, "internal inconsistency: channel buffer over capacity")
        assert(!isClosed || (senders.isEmpty && receivers.isEmpty),
               "internal inconsistency: waiters queued on a closed channel")
    }
}
