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
    /// (it is level-triggered: all of them may proceed and re-check). Each kind is a
    /// ``WaiterList``: one waiter (the common case) allocates nothing, and a cancelled or timed-out
    /// waiter is withdrawn in O(1) amortised at any number of waiters.
    struct IOWaiters {
        var readers = WaiterList<WaitTicket>()
        var writers = WaiterList<WaitTicket>()
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
            // The lists are changed in place, inside the dictionary: a copy of `IOWaiters` held
            // across a change would make the list copy its whole overflow (O(n) per waiter).
            let interest = ioWaiters[fd].map { (readable: !writable || !$0.readers.isEmpty,
                                                writable: writable || !$0.writers.isEmpty) }
                ?? (readable: !writable, writable: writable)
            let err = poller.arm(fd: fd, readable: interest.readable, writable: interest.writable)
            if err == EPERM {
                // Regular files and the like are always ready and cannot be polled.
                return true
            }
            if err != 0 { throw CoroutineError.pollFailed(errno: err) }
            if writable {
                ioWaiters[fd, default: IOWaiters()].writers.append(ticket)
            } else {
                ioWaiters[fd, default: IOWaiters()].readers.append(ticket)
            }
            return false
        }, unregister: { ticket in
            removeIOWaiter(ticket, fd: fd, writable: writable)
        })
    }

    /// Withdraws `ticket` (claimed by its canceller or timeout) from the waiters of `fd`, if it is
    /// still there, and re-arms or disarms the poller when the interest changed (no waiter of its
    /// kind is left). Scheduler thread only. - Complexity: O(1) amortised.
    private func removeIOWaiter(_ ticket: WaitTicket, fd: Int32, writable: Bool) {
        // In place (see `waitForIO`); nothing to do if no waiter of this kind is queued.
        guard ioWaiters[fd].map({ writable ? !$0.writers.isEmpty : !$0.readers.isEmpty }) == true else { return }
        if writable { ioWaiters[fd]?.writers.withdraw(ticket) } else { ioWaiters[fd]?.readers.withdraw(ticket) }
        guard let left = ioWaiters[fd].map({ (readers: !$0.readers.isEmpty, writers: !$0.writers.isEmpty) }) else { return }
        if !left.readers && !left.writers {
            ioWaiters[fd] = nil
            poller.disarm(fd: fd)
        } else if writable ? !left.writers : !left.readers {
            // The last waiter of this kind is gone: drop that interest.
            _ = poller.arm(fd: fd, readable: left.readers, writable: left.writers)
        }
    }
}
