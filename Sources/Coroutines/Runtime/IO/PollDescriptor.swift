import Synchronization

/// A descriptor whose owner knows when it is closed, waited on through persistent, edge-triggered
/// poller registrations: the role of Go's `pollDesc` (runtime `netpoll.go`, `netpoll_epoll.go`,
/// `netpoll_kqueue.go`). `CoroutinesFoundation`'s sockets keep one for their whole life. Not
/// public API.
///
/// ## Registrations
/// The first ``wait(writable:publish:)`` on a scheduler registers the descriptor in that
/// scheduler's poller once — epoll `EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`, kqueue `EVFILT_READ` and
/// `EVFILT_WRITE` with `EV_CLEAR` — on that scheduler's thread. Later waits on that scheduler make
/// no system call and allocate nothing. A descriptor waited on from coroutines of several
/// schedulers is registered in each one's poller; an edge then reaches all of them, and a
/// scheduler where nobody waits keeps it as stale readiness (costing its next waiter one extra
/// `EAGAIN` attempt).
///
/// The registration is keyed by (descriptor number, ``id``): every `PollDescriptor` draws a fresh
/// `id`, so a number closed and reused by a new socket is registered anew and never inherits the
/// old readiness or waiters. Each registration also carries a sequence number in the poller's
/// datum (epoll `data.u64`, kqueue `udata`); events of an older registration of the number are
/// ignored (Go's `fdseq`).
///
/// Closing: the owner ends the waits itself (``IOWaitToken/interrupt()``, published through
/// `publish`), and `close(2)` removes the descriptor from every epoll/kqueue set. A scheduler's
/// record of a closed descriptor stays behind, stale and inert, until the number is registered
/// again there. The owner must therefore `close(2)` the descriptor only when no wait is in
/// progress (the sockets count their operations for that, as Go's `fdMutex` does).
///
/// ## State machine (per scheduler and direction; Go's `rg`/`wg` with `pdReady`)
/// Confined to the scheduler's thread, so no atomics are needed beyond the wait ticket's claim:
///
/// | state          | edge arrives                                          | wait                          |
/// |----------------|-------------------------------------------------------|-------------------------------|
/// | idle           | → ready                                               | → waiting(ticket), suspend    |
/// | ready          | → ready                                               | → idle, return at once        |
/// | waiting(t)     | claim t: → idle, t resumes; t already claimed → ready | (one waiter per direction)    |
///
/// A cancellation, timeout or close that claims the ticket first moves waiting(t) → idle when the
/// woken coroutine unregisters. Invariants: a direction is never ready and waiting at once; an
/// edge is never lost — it either resumes the waiter it claimed or leaves the direction ready;
/// error and hang-up conditions (`EPOLLERR`, `EPOLLHUP`, `EV_EOF`) count as an edge in both
/// directions. Readiness is a hint: after a wait returns, the caller retries its system call and
/// waits again on `EAGAIN`.
///
/// Threading: the value is immutable and `Sendable`; ``wait(writable:publish:)`` is called by a
/// coroutine, and touches only its own scheduler's state.
package struct PollDescriptor: Sendable {
    /// The descriptor number.
    package let fd: Int32
    /// Identifies this descriptor among all that ever had the number `fd` (never 0).
    package let id: UInt64

    private static let nextID = Atomic<UInt64>(0)

    /// Wraps `fd`, which the caller owns and must keep open while a wait is in progress.
    ///
    /// - Parameter fd: An open descriptor that supports polling (a socket, pipe, …), usually
    ///   non-blocking.
    /// - Complexity: O(1), one atomic increment. Thread-safe.
    /// - Precondition: `fd >= 0` (the poll table is indexed by the number).
    package init(fd: Int32) {
        precondition(fd >= 0, "PollDescriptor needs an open descriptor, got \(fd)")
        self.fd = fd
        id = Self.nextID.add(1, ordering: .relaxed).newValue
    }

    /// Suspends the calling coroutine until the descriptor has become readable (or writable)
    /// since the last wait for that direction returned, or until another thread ends the wait.
    ///
    /// Returns at once, without suspending, if an edge arrived while nobody waited (the remembered
    /// readiness is consumed). Otherwise `publish` runs on the calling coroutine after the
    /// suspension is armed and before it suspends; it stores the token where a closer can find it
    /// and returns true, or returns false to skip the wait (the descriptor was closed meanwhile).
    /// A closer that calls ``IOWaitToken/interrupt()`` after publication is never lost; the wait
    /// then returns normally and the caller re-checks its own state.
    ///
    /// - Parameters:
    ///   - writable: Wait for room to write instead of data to read.
    ///   - publish: See above; not called when the wait returns at once.
    /// - Throws: `CoroutineError.notInCoroutine`; `CancellationError`; `CoroutineError.timedOut`
    ///   inside `withTimeout` (the cancellation race of <doc:Cancellation> is decided by the wait
    ///   ticket's claim: a readiness that loses it stays remembered); `CoroutineError.pollFailed`
    ///   if the descriptor cannot be registered (`EBADF`). A descriptor the poller refuses as
    ///   always ready (`EPERM`: regular files) returns at once.
    /// - Suspends: yes, unless readiness was remembered or `publish` returns false; resumes on the
    ///   coroutine's own scheduler.
    /// - Complexity: O(1). The first wait on a scheduler makes one `epoll_ctl`/`kevent`; later
    ///   ones make no system call and no allocation.
    package func wait(writable: Bool, publish: (IOWaitToken) -> Bool) throws {
        try Coroutine.withCurrent { c in
            try c.scheduler.waitForReadiness(c, self, writable: writable) { ticket in
                publish(IOWaitToken(ticket: ticket))
            }
        }
    }
}
