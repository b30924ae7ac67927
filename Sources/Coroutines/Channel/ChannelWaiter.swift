import CCoroutines
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

/// A coroutine blocked on a channel (the role of Go's `sudog`), and its link in the channel's
/// wait queue.
///
/// The record lives on the waiting coroutine's stack, next to its value and outcome, for the
/// whole suspension (a coroutine's stack never moves), and the channel's queue links records
/// through pointers (an intrusive list): queueing allocates nothing, and the waker finds the
/// waiter, its value and its outcome in one place. The waiter removes its record before the
/// frame ends: the waker that claims it pops it; a cancelled, timed-out or losing waiter
/// withdraws it under the channel's lock; `close` pops every record.
///
/// The value moves through raw pointers into the waiting coroutine's stack, as in Go: a sender's
/// `element` points at the value to deliver (an initialised `Element`, copied out), a receiver's at
/// uninitialised memory for one `Element`, which the claimer initialises. Only the waker that wins
/// ``tryClaim()`` touches them, under the channel's lock, so the hand-off and the state change are
/// one atomic step (<doc:ChannelsAndSelect>). A `select` publishes one record per case, all with
/// the same coroutine and epoch, so exactly one case wins.
///
/// The record refers to its coroutine without retaining it: it is reachable from a queue only
/// while that coroutine is suspended in the operation that queued it, and a suspended coroutine
/// is kept alive by its scheduler's registry. A waker that claims the record wakes it after
/// releasing the channel's lock as a ``ClaimedCoroutine``, still without a reference: a claimed
/// coroutine cannot run, so cannot finish, until it is made ready.
@usableFromInline
struct ChannelWaiter {
    @usableFromInline let coroutine: Unmanaged<Coroutine>
    @usableFromInline let epoch: UInt64
    @usableFromInline let element: UnsafeMutableRawPointer
    @usableFromInline let outcome: UnsafeMutablePointer<WaitOutcome>
    @usableFromInline let caseIndex: Int
    // Queue links: guarded by the lock of the channel whose queue holds the record.
    @usableFromInline var next: UnsafeMutablePointer<ChannelWaiter>?
    @usableFromInline var previous: UnsafeMutablePointer<ChannelWaiter>?

    /// A record for `coroutine`, suspended (or about to suspend) with the armed `epoch`.
    @inlinable
    init(coroutine: Unmanaged<Coroutine>, epoch: UInt64, element: UnsafeMutableRawPointer,
         outcome: UnsafeMutablePointer<WaitOutcome>, caseIndex: Int) {
        self.coroutine = coroutine
        self.epoch = epoch
        self.element = element
        self.outcome = outcome
        self.caseIndex = caseIndex
        next = nil
        previous = nil
    }

    /// Claims the waiter's suspension (``Coroutine/tryClaim(epoch:)``), without reference counting.
    @inlinable @inline(__always)
    func tryClaim() -> Bool {
        coroutine._withUnsafeGuaranteedRef { $0.tryClaim(epoch: epoch) }
    }

}

/// A FIFO queue of channel waiters: a doubly linked list of records on the waiters' stacks.
///
/// Not thread-safe: guarded by its channel's lock.
/// - Invariants: `head == nil` exactly when `tail == nil`; `headCoroutine` is the coroutine of
///   `head` (nil when empty); a record is in at most one queue;
///   a record that is not linked has no links (so ``contains(_:)`` needs no flag, as in Go's
///   `dequeueSudoG`).
/// - Complexity: O(1) `append`, `popFirst` and `remove(_:)`.
@usableFromInline
struct ChannelWaitQueue {
    @usableFromInline var head: UnsafeMutablePointer<ChannelWaiter>?
    @usableFromInline var tail: UnsafeMutablePointer<ChannelWaiter>?
    /// The coroutine of `head`, kept beside it: a waker then loads the record (on the waiter's
    /// stack) and the coroutine it claims in parallel, not one after the other.
    @usableFromInline var headCoroutine: Unmanaged<Coroutine>?

    @inlinable init() {}

    @inlinable var isEmpty: Bool { head == nil }

    /// Whether `waiter` is linked in this queue (a record is only ever queued in one queue).
    @inlinable func contains(_ waiter: UnsafeMutablePointer<ChannelWaiter>) -> Bool {
        waiter.pointee.previous != nil || head == waiter
    }

    /// Links `waiter` at the end. It must not be queued.
    @inlinable mutating func append(_ waiter: UnsafeMutablePointer<ChannelWaiter>) {
        assert(!contains(waiter) && waiter.pointee.next == nil, "internal inconsistency: a channel waiter queued twice")
        waiter.pointee.previous = tail
        if let tail {
            tail.pointee.next = waiter
        } else {
            head = waiter
            headCoroutine = waiter.pointee.coroutine
        }
        tail = waiter
    }

    /// Starts loading the head waiter's coroutine, which a waker claims right after it pops the
    /// record: the two cache misses then overlap.
    @inlinable @inline(__always)
    func prefetchHead() {
        assert(headCoroutine?.toOpaque() == head?.pointee.coroutine.toOpaque(),
               "internal inconsistency: a channel wait queue's head coroutine is not its head record's")
        if let c = headCoroutine { ccoro_prefetch(c.toOpaque()) }
    }

    /// Unlinks and returns the oldest record.
    @inlinable mutating func popFirst() -> UnsafeMutablePointer<ChannelWaiter>? {
        guard let first = head else { return nil }
        head = first.pointee.next
        if let head {
            head.pointee.previous = nil
            headCoroutine = head.pointee.coroutine
        } else {
            tail = nil
            headCoroutine = nil
        }
        first.pointee.next = nil
        return first
    }

    /// Unlinks `waiter` if it is still queued here.
    @inlinable mutating func remove(_ waiter: UnsafeMutablePointer<ChannelWaiter>) {
        guard contains(waiter) else { return }
        let previous = waiter.pointee.previous, next = waiter.pointee.next
        if let previous { previous.pointee.next = next } else {
            head = next
            headCoroutine = next?.pointee.coroutine
        }
        if let next { next.pointee.previous = previous } else { tail = previous }
        waiter.pointee.next = nil
        waiter.pointee.previous = nil
    }
}
