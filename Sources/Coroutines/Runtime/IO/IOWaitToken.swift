/// One published I/O wait of one coroutine, which another thread may end early.
///
/// `CoroutinesFoundation`'s sockets keep the token of their reader and writer so that `close()`
/// can wake them: epoll does not report a descriptor closed while a coroutine waits on it, so
/// the closer must end the wait itself. Tokens come from ``PollDescriptor/wait(writable:publish:)``.
/// Not public API.
///
/// Threading: any thread. A token is only good for the one suspension it was armed for; a stale
/// token's ``interrupt()`` does nothing.
package struct IOWaitToken: Sendable {
    let ticket: WaitTicket

    /// Ends the wait as if the descriptor had become ready: the waiting coroutine returns
    /// normally from ``PollDescriptor/wait(writable:publish:)`` (and re-checks its own state).
    /// It runs on its own scheduler, never inside this call.
    /// - Returns: false if the wait had already ended (readiness, cancellation, timeout).
    /// - Complexity: O(1).
    @discardableResult
    package func interrupt() -> Bool { ticket.resume(.completed) }
}
