#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension CoroutineScheduler {
    /// Suspends `c` (running on this scheduler) until `descriptor` becomes ready for the
    /// direction, through this scheduler's persistent edge-triggered registration of it (made
    /// here on first use). See ``PollDescriptor`` for the state machine; the algorithm is Go's
    /// netpoll (runtime `netpoll.go`: `netpollblock`, `netpollready`).
    ///
    /// `publish` sees the armed ticket before the coroutine suspends; returning false skips the
    /// wait. A wait ended by the ticket's holder (close) rather than the poller leaves the ticket
    /// parked in the table: it is removed here.
    ///
    /// - Throws: `CancellationError` or `CoroutineError.timedOut` if the wait is interrupted;
    ///   `CoroutineError.pollFailed` if the descriptor cannot be registered.
    /// - Suspends: unless readiness was remembered or `publish` returns false; resumes on this
    ///   scheduler.
    ///
    /// Scheduler thread only; O(1); no system call or allocation after the first wait.
    func waitForReadiness(_ c: Coroutine, _ descriptor: PollDescriptor, writable: Bool,
                          publish: (WaitTicket) -> Bool) throws {
        try c.checkInterrupts()
        let fd = descriptor.fd, owner = descriptor.id
        if !pollTable.isRegistered(fd: fd, owner: owner) {
            guard try register(descriptor) else { return }
        }
        if pollTable.consumeReady(fd: fd, writable: writable) { return }
        var published: WaitTicket?
        try c.wait(writable ? .writable : .readable, register: { ticket in
            guard publish(ticket) else { return true }
            published = ticket
            if let displaced = pollTable.setWaiter(fd: fd, writable: writable, ticket) { displaced.resume() }
            return false
        }, unregister: { ticket in
            pollTable.removeWaiter(fd: fd, owner: owner, writable: writable, ticket)
        })
        if let published { pollTable.removeWaiter(fd: fd, owner: owner, writable: writable, published) }
    }

    /// Registers `descriptor` in this scheduler's poller (once per descriptor and scheduler).
    /// Returns false if the poller refuses it as always ready (`EPERM`).
    /// - Throws: `CoroutineError.pollFailed` for any other refusal (`EBADF`, `ENOMEM`).
    private func register(_ descriptor: PollDescriptor) throws -> Bool {
        let (datum, leftovers) = pollTable.claim(fd: descriptor.fd, owner: descriptor.id)
        for t in leftovers { t.resume() }
        let err = poller.register(fd: descriptor.fd, datum: datum)
        if err == 0 { return true }
        pollTable.release(fd: descriptor.fd)
        if err == EPERM { return false }
        throw CoroutineError.pollFailed(errno: err)
    }
}
