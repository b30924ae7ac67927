/// How a waiter's wait on a channel ended, written by whoever claims the waiter.
///
/// It lives on the waiting coroutine's stack for the duration of the suspension (a coroutine's
/// stack never moves) and is shared by every case of one `select`.
@usableFromInline
struct WaitOutcome {
    /// Index of the `select` case that completed (0 for a plain send or receive); -1 while waiting.
    @usableFromInline var caseIndex = -1
    /// The channel closed: a receiver got no value; a sender's value was not delivered.
    @usableFromInline var closed = false

    @inlinable init() {}
}

/// A coroutine blocked on a channel (the role of Go's `sudog`).
///
/// The value moves through raw pointers into the waiting coroutine's stack, as in Go: a sender's
/// `element` points at the value to deliver (an initialised `Element`, copied out), a receiver's
/// at uninitialised memory for one `Element`, which the claimer initialises. Only the waker that wins ``WaitTicket/tryClaim()`` touches them, under the
/// channel's lock, so the hand-off and the state change are one atomic step (SPEC §6.7). A
/// `select` publishes one waiter per case, all with the same ticket, so exactly one case wins.
@usableFromInline
struct ChannelWaiter {
    @usableFromInline let ticket: WaitTicket
    @usableFromInline let element: UnsafeMutableRawPointer
    @usableFromInline let outcome: UnsafeMutablePointer<WaitOutcome>
    @usableFromInline let caseIndex: Int

    @inlinable
    init(ticket: WaitTicket, element: UnsafeMutableRawPointer, outcome: UnsafeMutablePointer<WaitOutcome>,
         caseIndex: Int) {
        self.ticket = ticket
        self.element = element
        self.outcome = outcome
        self.caseIndex = caseIndex
    }
}

/// A FIFO queue of channel waiters with removal of a withdrawn waiter.
///
/// Not thread-safe: guarded by its channel's lock.
/// - Complexity: amortised O(1) `append` and `popFirst` (which moves the waiter out, without
///   reference counting); O(n) `remove(_:)`.
@usableFromInline
struct ChannelWaitQueue {
    @usableFromInline var items = RingBuffer<ChannelWaiter>(capacity: 0)

    @inlinable init() {}

    @inlinable var isEmpty: Bool { items.isEmpty }

    @inlinable mutating func append(_ waiter: __owned ChannelWaiter) {
        items.append(waiter)
    }

    @inlinable mutating func popFirst() -> ChannelWaiter? {
        items.popFirst()
    }

    /// Removes the waiter published with `ticket`, if it is still queued.
    @inlinable mutating func remove(_ ticket: WaitTicket) {
        _ = items.remove { $0.ticket.matches(ticket) }
    }

    /// Removes every waiter and returns them in FIFO order.
    @inlinable mutating func removeAll() -> [ChannelWaiter] {
        var all: [ChannelWaiter] = []
        all.reserveCapacity(items.count)
        while let w = items.popFirst() { all.append(w) }
        return all
    }
}
