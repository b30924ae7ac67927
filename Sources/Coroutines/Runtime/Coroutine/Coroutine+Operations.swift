import Synchronization
import CCoroutines

extension Coroutine {
    /// Suspends the current coroutine for at least `duration`, without blocking its thread.
    ///
    /// A duration of zero or less behaves as ``yield()``. Cancellation ends the delay early and its
    /// timer is released at once (no timer is left to fire).
    ///
    /// - Parameter duration: How long to wait.
    /// - Throws: `CoroutineError.notInCoroutine` outside a coroutine; `CancellationError` if the
    ///   coroutine is cancelled; `CoroutineError.timedOut` inside an expiring `withTimeout`.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(log n) in the scheduler's armed timers.
    public static func delay(_ duration: Duration) throws {
        guard duration > .zero else { return try yield() }
        try withCurrent { c in
            let deadline = deadlineNanoseconds(after: duration)
            let scheduler = c.scheduler
            var node: TimerNode?
            try c.wait(.delay, register: { ticket in
                node = scheduler.armTimer(deadline: deadline) { ticket.resume() }
                return false
            }, unregister: { _ in
                if let node { scheduler.disarmTimer(node) }
            })
        }
    }

    /// Lets the other ready coroutines of this scheduler run, then continues.
    ///
    /// - Throws: `CoroutineError.notInCoroutine` outside a coroutine; `CancellationError` if the
    ///   coroutine is cancelled.
    /// - Suspends: yes (the coroutine goes to the back of the run queue); resumes on its own
    ///   scheduler.
    /// - Complexity: O(1).
    public static func yield() throws {
        try withCurrent { c in
            try c.checkInterrupts()
            c.placement._withUnsafeGuaranteedRef { s in
                c.status = .ready
                s.runQueue.append(Unmanaged.passUnretained(c))
                c.waitKindValue.store(WaitKind.yield.rawValue, ordering: .relaxed)
                s.switchAway(from: c)
            }
            c.waitKindValue.store(WaitKind.none.rawValue, ordering: .relaxed)
            try c.checkInterrupts()
        }
    }

    /// Runs `body` in the calling coroutine with a time limit.
    ///
    /// If `body` has not returned after `duration`, the suspending operation in progress (or the
    /// next one) throws, and `withTimeout` throws `CoroutineError.timedOut`. Timeouts nest: each
    /// scope reports its own expiry. The timer is released when the body returns first.
    ///
    /// - Parameters:
    ///   - duration: The time limit (≤ 0: the first suspending operation times out).
    ///   - body: The work to run.
    /// - Returns: The body's value.
    /// - Throws: `CoroutineError.timedOut`, `CoroutineError.notInCoroutine`, or what the body throws.
    /// - Suspends: as the body does; resumes on the coroutine's own scheduler.
    /// - Complexity: O(log n) in armed timers, plus the body.
    public static func withTimeout<Value>(_ duration: Duration, _ body: () throws -> Value) throws -> Value {
        // A reference of its own, not a borrow (`withCurrent`): in a generator body the scope can
        // end on another coroutine's behalf, after this one finished and was reaped, and its
        // bookkeeping and timer need it alive until the scope is gone.
        guard let c = current else { throw CoroutineError.outsideCoroutine }
        let scope = TimeoutScope()
        let deadline = deadlineNanoseconds(after: duration)
        if deadline <= ccoro_now_ns() {
            c.expire(scope)          // no time at all: the first suspending call times out
        } else {
            scope.timer = c.scheduler.armTimer(deadline: deadline) { [unowned c] in
                scope.timer = nil
                c.expire(scope)
                c.interruptWait(.timedOut)
            }
        }
        c.timeoutScopes.append(scope)
        defer {
            if let i = c.timeoutScopes.lastIndex(where: { $0 === scope }) { c.timeoutScopes.remove(at: i) }
            if scope.expired { c.expiredTimeoutScopes -= 1 }
            if let t = scope.timer { c.scheduler.disarmTimer(t) }
        }
        let value: Value
        do {
            value = try body()
        } catch {
            if scope.expired { throw CoroutineError.timedOut }
            throw error
        }
        // The body swallowed the timeout of an operation (e.g. a `for x in channel` loop, which
        // ends on it): the time limit was still exceeded.
        if scope.delivered { throw CoroutineError.timedOut }
        return value
    }

    /// Marks `scope` expired and counts it (``expiredTimeoutScopes``), so that every later
    /// suspending call throws `CoroutineError.timedOut`. On the coroutine's scheduler thread.
    private func expire(_ scope: TimeoutScope) {
        scope.expired = true
        expiredTimeoutScopes += 1
    }

    /// Suspends the current coroutine until `fd` is readable (or has an error or hang-up).
    ///
    /// Uses the scheduler's epoll/kqueue poller. Descriptors that cannot be polled because they
    /// are always ready (regular files) return at once.
    ///
    /// - Parameter fd: An open file descriptor, usually non-blocking.
    /// - Throws: `CoroutineError.notInCoroutine`, `CancellationError`, `CoroutineError.timedOut`,
    ///   `CoroutineError.pollFailed` (e.g. a closed descriptor).
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) plus one `epoll_ctl`.
    public static func waitUntilReadable(_ fd: Int32) throws {
        try withCurrent { c in try c.scheduler.waitForIO(c, fd: fd, writable: false) }
    }

    /// Suspends the current coroutine until `fd` is writable (or has an error or hang-up).
    ///
    /// - Parameter fd: An open file descriptor, usually non-blocking.
    /// - Throws: as ``waitUntilReadable(_:)``.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) plus one `epoll_ctl`.
    public static func waitUntilWritable(_ fd: Int32) throws {
        try withCurrent { c in try c.scheduler.waitForIO(c, fd: fd, writable: true) }
    }
}
