import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `Coroutine.waitUntilReadable`/`waitUntilWritable` for arbitrary descriptors: one-shot
/// interest, re-armed on every wait (see ``waitForIO(_:fd:writable:)``).
extension CoroutineScheduler {
    /// The coroutines waiting for one descriptor. Readiness wakes every waiter of that kind
    /// (it is level-triggered: all of them may proceed and re-check).
    struct IOWaiters {
        var readers: [WaitTicket] = []
        var writers: [WaitTicket] = []
        var isEmpty: Bool { readers.isEmpty && writers.isEmpty }
    }

    /// Suspends `c` (running on this scheduler) until `fd` is readable or writable, with one-shot
    /// interest re-armed (`epoll_ctl`/`kevent`) on every wait. Several coroutines may wait for the
    /// same descriptor; readiness wakes them all.
    ///
    /// This is the path of `Coroutine.waitUntilReadable`/`waitUntilWritable` for arbitrary
    /// descriptors, which the caller may close, `dup2` over or share with other processes without
    /// telling us: a persistent registration (``PollDescriptor``) could not tell such a reused
    /// number from the one it registered (stale readiness would end a wait early), and the
    /// registration of a file still open elsewhere (a `dup`, a child process) would keep
    /// reporting events after the caller closed its number. Sockets, whose owner knows when they
    /// close, use ``waitForReadiness(_:_:writable:publish:)`` instead.
    func waitForIO(_ c: Coroutine, fd: Int32, writable: Bool) throws {
        try c.wait(writable ? .writable : .readable, register: { ticket in
            var w = ioWaiters[fd] ?? IOWaiters()
            if writable { w.writers.append(ticket) } else { w.readers.append(ticket) }
            let err = poller.arm(fd: fd, readable: !w.readers.isEmpty, writable: !w.writers.isEmpty)
            if err == EPERM {
                // Regular files and the like are always ready and cannot be polled.
                return true
            }
            if err != 0 { throw CoroutineError.pollFailed(errno: err) }
            ioWaiters[fd] = w
            return false
        }, unregister: { ticket in
            removeIOWaiter(ticket, fd: fd)
        })
    }

    /// Removes `ticket` from the waiters of `fd`, if it is still there, and re-arms or disarms
    /// the poller for the waiters left. Scheduler thread only.
    private func removeIOWaiter(_ ticket: WaitTicket, fd: Int32) {
        guard var w = ioWaiters[fd] else { return }
        let before = w.readers.count + w.writers.count
        w.readers.removeAll { $0.matches(ticket) }
        w.writers.removeAll { $0.matches(ticket) }
        guard w.readers.count + w.writers.count != before else { return }
        if w.isEmpty {
            ioWaiters[fd] = nil
            poller.disarm(fd: fd)
        } else {
            ioWaiters[fd] = w
            _ = poller.arm(fd: fd, readable: !w.readers.isEmpty, writable: !w.writers.isEmpty)
        }
    }
}
