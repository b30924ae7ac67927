/// A typed conduit between coroutines with Go's semantics: rendezvous, buffered or unbounded,
/// closable, and usable in ``select(_:)``.
///
/// ```swift
/// let results = Channel<Int>()                  // rendezvous
/// Coroutine.launch { for i in 0..<3 { try results.send(i) }; results.close() }
/// Coroutine.launch { for value in results { print(value) } }   // 0, 1, 2, then the loop ends
/// ```
///
/// ## Semantics
/// The full rules are in <doc:ChannelsAndSelect>.
/// - Capacity 0 is a rendezvous: a send completes only when a receiver takes the value. Capacity
///   n buffers n values; ``Capacity/unbounded`` never blocks a sender.
/// - FIFO everywhere: buffered values, blocked senders, blocked receivers.
/// - ``close()`` is idempotent. Buffered values stay receivable; then receives throw
///   ``ChannelError/closed`` (or the error given to ``close(throwing:)``) at once, forever.
///   Senders blocked at the close, and every later send, throw ``ChannelError/closed``; their
///   values are never delivered.
/// - Cancelling a blocked coroutine withdraws it: its value is never delivered later and it
///   never consumes a later value. If a peer completed the operation first, the operation
///   returns normally and the cancellation is seen at the next suspending call (see
///   <doc:Cancellation>).
///
/// ## Threading
/// Every member is thread-safe; senders and receivers may run on different schedulers. A value
/// changes hands in the same locked step as the channel's state, and a woken coroutine resumes
/// on its own scheduler after the lock is released, never inside the waker's call.
///
/// The algorithm is Go's (runtime `chan.go`): one lock per channel, FIFO queues of waiter
/// records, direct hand-off between a sender and a waiting receiver.
public final class Channel<Element: Sendable>: @unchecked Sendable {
    // The channel object is itself the lock-owning storage, so that an operation reaches the lock
    // and the state with one load from the channel reference (no separate storage object: one
    // dependent cache miss less on a cold channel). The locked operations live in
    // `Channel+Storage.swift`.
    //
    // Thread-safety: `state` is guarded by `lock` (hence `@unchecked Sendable`). Coroutines are
    // only ever made ready after the lock is released, and never resumed inside the caller
    // (the wake-up order of the CoroutineLifecycle article, <doc:CoroutineLifecycle>).

    /// Guards `state`. Taken alone by the channel operations, and with the other channels of a
    /// `select` in address order (through ``lockAddress``).
    @usableFromInline let lock = FutexLock()
    /// Guarded by `lock`.
    @usableFromInline @exclusivity(unchecked) var state: ChannelStateMachine<Element>

    /// Creates a channel.
    ///
    /// - Parameter capacity: 0 (the default) for a rendezvous channel, `n` or `.bounded(n)` to
    ///   buffer n values, `.unbounded` to never block senders. The buffer grows lazily.
    /// - Complexity: O(1).
    @inlinable
    public init(capacity: Capacity = 0) {
        state = ChannelStateMachine(capacity: capacity.value)
        self.capacity = capacity.value
    }

    /// Creates a channel whose capacity is a run-time number.
    ///
    /// - Parameter capacity: How many values to buffer; 0 for a rendezvous channel. Must not be
    ///   negative (a precondition failure otherwise).
    @inlinable
    public convenience init(capacity: Int) {
        self.init(capacity: Capacity.bounded(capacity))
    }

    /// Sends `value`, suspending the current coroutine until a receiver takes it (capacity 0) or
    /// there is room in the buffer.
    ///
    /// - Parameter value: The value to deliver.
    /// - Throws: ``ChannelError/closed`` if the channel is closed, or closes while this send is
    ///   blocked (the value is then never delivered); `CancellationError` if the coroutine is
    ///   cancelled (checked first, even when there is room); `CoroutineError.timedOut` inside an
    ///   expiring `withTimeout`; `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: while there is no room and no waiting receiver; resumes on the coroutine's own
    ///   scheduler.
    /// - Complexity: O(1) amortised, plus O(stale waiters) skipped.
    @inlinable
    public func send(_ value: Element) throws {
        try Coroutine.withCurrent { try send(value, from: $0) }
    }

    /// Receives the oldest value, suspending the current coroutine while there is none.
    ///
    /// - Returns: The value.
    /// - Throws: ``ChannelError/closed`` (or the error passed to ``close(throwing:)``) once the
    ///   channel is closed and drained; `CancellationError` if the coroutine is cancelled
    ///   (checked first, even when a value is ready); `CoroutineError.timedOut` inside an
    ///   expiring `withTimeout`; `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: while the channel is empty and open; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) amortised, plus O(stale waiters) skipped.
    @inlinable
    public func receive() throws -> Element {
        try Coroutine.withCurrent { try receive(from: $0) }
    }

    /// Sends `value` only if it can be taken now: by a waiting receiver or into the buffer.
    ///
    /// Never discards a value it reports as sent. Works from any thread, inside or outside a
    /// coroutine, and does not check cancellation.
    /// - Returns: true if the value was delivered or buffered; false if there was no room.
    /// - Throws: ``ChannelError/closed`` if the channel is closed.
    /// - Suspends: no. - Complexity: O(1) amortised.
    @inlinable
    public func trySend(_ value: Element) throws -> Bool {
        lock.lock()
        let action = state.send(value)
        lock.unlock()
        return try complete(action)
    }

    /// Receives a value only if one is ready now: buffered, or offered by a blocked sender (also
    /// on a rendezvous channel).
    ///
    /// Works from any thread and does not check cancellation.
    /// - Returns: The value, or nil if none is ready.
    /// - Throws: ``ChannelError/closed`` (or the close error) once closed and drained.
    /// - Suspends: no. - Complexity: O(1) amortised.
    @inlinable
    public func tryReceive() throws -> Element? {
        lock.lock()
        let action = state.receive()
        lock.unlock()
        return try complete(action)
    }

    /// Closes the channel: no more values can be sent; buffered values can still be received.
    ///
    /// Wakes every blocked receiver (they throw ``ChannelError/closed`` once the buffer is
    /// drained) and every blocked sender (it throws ``ChannelError/closed``; its value is not
    /// delivered). Any thread; does not check cancellation.
    /// - Returns: true for the call that closed the channel, false if it was already closed.
    /// - Suspends: no. Throws nothing.
    /// - Complexity: O(waiters).
    @discardableResult
    public func close() -> Bool {
        close(error: nil)
    }

    /// Closes the channel so that receivers get `error` once the buffer is drained.
    ///
    /// Otherwise as ``close()``: senders (blocked or later) get ``ChannelError/closed``.
    /// - Parameter error: What `receive()` and `tryReceive()` throw after the drain.
    /// - Returns: true for the call that closed the channel, false if it was already closed (the
    ///   first error is kept).
    /// - Suspends: no. Throws nothing.
    /// - Complexity: O(waiters).
    @discardableResult
    public func close(throwing error: any Error) -> Bool {
        close(error: error)
    }

    /// Whether ``close()`` or ``close(throwing:)`` was called. Any thread; never suspends; O(1).
    public var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return state.isClosed
    }

    /// The number of buffered values (not counting blocked senders). Any thread; never suspends;
    /// O(1).
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return state.buffer.count
    }

    /// How many values the channel buffers: 0 for a rendezvous channel, `Int.max` when unbounded.
    /// Any thread; never suspends; O(1) (an immutable copy of the state's capacity, read without
    /// the lock).
    public let capacity: Int
}

extension Channel {
    /// The buffering of a channel: a number of values, or ``unbounded``.
    ///
    /// Written as an integer literal (`Channel<Int>(capacity: 8)`), ``bounded(_:)`` or
    /// ``unbounded``.
    public struct Capacity: Sendable, Hashable, ExpressibleByIntegerLiteral {
        @usableFromInline let value: Int

        @inlinable init(value: Int) { self.value = value }

        /// A buffer that grows as needed: sends never block.
        public static var unbounded: Capacity { Capacity(value: .max) }

        /// A buffer of `n` values (0: rendezvous). `n < 0` is a precondition failure.
        @inlinable
        public static func bounded(_ n: Int) -> Capacity {
            precondition(n >= 0, "Channel capacity must not be negative (got \(n))")
            return Capacity(value: n)
        }

        /// A buffer of `value` values. A negative literal is a precondition failure.
        @inlinable
        public init(integerLiteral value: Int) {
            self = .bounded(value)
        }
    }
}
