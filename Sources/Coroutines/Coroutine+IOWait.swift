/// One published I/O wait of one coroutine, which another thread may end early.
///
/// `CoroutinesFoundation`'s sockets keep the token of their reader and writer so that `close()`
/// can wake them: epoll does not report a descriptor closed while a coroutine waits on it, so
/// the closer must end the wait itself. Not public API.
///
/// Threading: any thread. A token is only good for the one suspension it was armed for; a stale
/// token's ``interrupt()`` does nothing.
package struct IOWaitToken: Sendable {
    let ticket: WaitTicket

    /// Ends the wait as if the descriptor had become ready: the waiting coroutine returns
    /// normally from ``Coroutine/waitForIO(_:writable:publish:)`` (and re-checks its own state).
    /// It runs on its own scheduler, never inside this call.
    /// - Returns: false if the wait had already ended (readiness, cancellation, timeout).
    /// - Complexity: O(1).
    @discardableResult
    package func interrupt() -> Bool { ticket.resume(.completed) }
}

extension Coroutine {
    /// ``waitUntilReadable(_:)`` / ``waitUntilWritable(_:)`` whose wait another thread can end.
    ///
    /// `publish` runs on the calling coroutine after the suspension is armed and before it
    /// suspends; it stores the token where a closer can find it and returns true, or returns false
    /// to skip the wait (the descriptor was closed meanwhile). A closer that calls
    /// ``IOWaitToken/interrupt()`` after publication is never lost.
    ///
    /// - Throws: as ``waitUntilReadable(_:)``.
    /// - Suspends: yes, unless `publish` returns false; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) plus one `epoll_ctl`/`kevent`.
    package static func waitForIO(_ fd: Int32, writable: Bool,
                                  publish: (IOWaitToken) -> Bool) throws {
        let c = try requireCurrent()
        try withoutActuallyEscaping(publish) { publish in
            try c.scheduler.waitForIO(c, fd: fd, writable: writable) { ticket in
                publish(IOWaitToken(ticket: ticket))
            }
        }
    }
}
