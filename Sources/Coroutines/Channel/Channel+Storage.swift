import CCoroutines

/// The locked operations of a channel (Go runtime `chan.go`: `chansend`, `chanrecv`,
/// `closechan`): each decides under `lock` with the ``ChannelStateMachine`` in `state`, and wakes
/// coroutines after releasing the lock. The public members in `Channel.swift` call these.
///
/// - Thread-safety: `state` is guarded by `lock`. Coroutines are only ever made ready after the
///   lock is released, and never resumed inside the caller (the wake-up order of
///   <doc:CoroutineLifecycle>).
extension Channel {
    // MARK: Suspending operations

    /// Sends `value` from the running coroutine `c`, suspending it while there is no room.
    @inlinable
    func send(_ value: Element, from c: Coroutine) throws {
        try c.checkInterrupts()
        lock.lock()
        let action = state.send(value)
        if case .full = action {
            return try sendWaiting(value, c)   // called with the lock held; returns without it
        }
        lock.unlock()
        _ = try complete(action)
    }

    /// Queues the current coroutine as a sender and suspends. Called with the lock held.
    @inlinable
    func sendWaiting(_ value: Element, _ c: Coroutine) throws {
        var value = value
        var outcome = WaitOutcome()
        try withUnsafeMutablePointer(to: &value) { element in
            try withUnsafeMutablePointer(to: &outcome) { outcome in
                try suspendWaiting(c, asSender: true, element: UnsafeMutableRawPointer(element), outcome: outcome)
            }
        }
        if outcome.closed { throw ChannelError.closed }
    }

    /// Publishes a waiter record for `c` (in this frame, on its stack) at the end of the senders'
    /// or the receivers' queue, releases the lock and suspends until a waker pops the record
    /// (normal return) or the wait is interrupted (the record is withdrawn, then this throws).
    /// Called with the lock held; returns without it.
    @inlinable @inline(__always)
    func suspendWaiting(_ c: Coroutine, asSender: Bool, element: UnsafeMutableRawPointer,
                        outcome: UnsafeMutablePointer<WaitOutcome>) throws {
        let epoch = c.armEpoch()
        var waiter = ChannelWaiter(coroutine: Unmanaged.passUnretained(c), epoch: epoch,
                                   element: element, outcome: outcome, caseIndex: 0)
        try withUnsafeMutablePointer(to: &waiter) { waiter in
            if asSender { state.senders.append(waiter) } else { state.receivers.append(waiter) }
            lock.unlock()
            try c.suspend(armedEpoch: epoch, .channel) { _ in
                if asSender { self.withdrawSender(waiter) } else { self.withdrawReceiver(waiter) }
            }
        }
    }

    /// Receives the oldest value for the running coroutine `c`, suspending it while there is none.
    @inlinable
    func receive(from c: Coroutine) throws -> Element {
        try c.checkInterrupts()
        lock.lock()
        let action = state.receive()
        if case .empty = action {
            return try receiveWaiting(c)   // called with the lock held; returns without it
        }
        lock.unlock()
        return try complete(action).unsafelyUnwrapped   // not empty: a value or an error
    }

    /// Queues the current coroutine as a receiver and suspends. Called with the lock held.
    @inlinable
    func receiveWaiting(_ c: Coroutine) throws -> Element {
        var outcome = WaitOutcome()
        return try withUnsafeTemporaryAllocation(of: Element.self, capacity: 1) { slot in
            let slot = slot.baseAddress.unsafelyUnwrapped
            try withUnsafeMutablePointer(to: &outcome) { outcome in
                try suspendWaiting(c, asSender: false, element: UnsafeMutableRawPointer(slot), outcome: outcome)
            }
            // A completed wake: the claimer either initialised the slot or marked the outcome
            // closed (the operation completed, so it returns normally: the race rule of the
            // Cancellation article, <doc:Cancellation>).
            if outcome.closed { throw closedReceiveError }
            precondition(outcome.caseIndex == 0, "internal inconsistency: a channel receiver was woken without a value")
            return slot.move()
        }
    }

    // MARK: Completing a decided operation (after the lock is released)

    /// Performs what a send decided under the lock: wakes the receiver it handed the value to.
    /// - Returns: false if there was no room (the value was not taken).
    /// - Throws: ``ChannelError/closed``.
    @inlinable @inline(__always)
    func complete(_ action: __owned ChannelStateMachine<Element>.SendAction) throws -> Bool {
        switch consume action {
        case .delivered(let receiver):
            receiver.wake()
            return true
        case .buffered:
            return true
        case .closed:
            throw ChannelError.closed
        case .full:
            return false
        }
    }

    /// Performs what a receive decided under the lock: wakes the sender whose value it took.
    /// - Returns: the value, or nil if there was none.
    /// - Throws: the receive error of a closed, drained channel.
    @inlinable @inline(__always)
    func complete(_ action: __owned ChannelStateMachine<Element>.ReceiveAction) throws -> Element? {
        switch consume action {
        case .value(let v, let sender):
            sender?.wake()
            return v
        case .closed(let error):
            throw error
        case .empty:
            return nil
        }
    }

    /// Closes the channel (receivers get `error`, or ``ChannelError/closed``, once drained) and
    /// wakes every waiter. Returns false if it was already closed.
    @usableFromInline
    func close(error: (any Error)?) -> Bool {
        lock.lock()
        let (closed, woken) = state.close(error: error)
        lock.unlock()
        var next = woken
        while let w = next {
            // Read the link first: the record is on the woken coroutine's stack, which may
            // unwind as soon as it is made ready (on another thread).
            next = w.pointee.next
            ClaimedCoroutine(w.pointee.coroutine).wake()
        }
        return closed
    }

    /// What a receive on this closed, drained channel throws.
    @usableFromInline
    var closedReceiveError: any Error {
        lock.lock()
        defer { lock.unlock() }
        return state.receiveError
    }

    // MARK: Select

    /// The address of `lock`, for a `select` that must lock channels of different element types
    /// in address order (``SelectCase/lock``). Valid while the channel is alive: the lock is a
    /// non-copyable stored property built on `Atomic`, which is always kept in place in the
    /// object (as the futex calls on its word already require).
    @inlinable
    var lockAddress: UnsafePointer<FutexLock> {
        withUnsafePointer(to: lock) { $0 }
    }

    // MARK: Withdrawal (cancellation, timeouts, losing select cases)

    /// Unlinks a sender's record if no waker popped it (it may have been popped and skipped).
    @usableFromInline
    func withdrawSender(_ waiter: UnsafeMutablePointer<ChannelWaiter>) {
        lock.lock()
        state.senders.remove(waiter)
        lock.unlock()
    }

    /// Unlinks a receiver's record if no waker popped it.
    @usableFromInline
    func withdrawReceiver(_ waiter: UnsafeMutablePointer<ChannelWaiter>) {
        lock.lock()
        state.receivers.remove(waiter)
        lock.unlock()
    }
}
