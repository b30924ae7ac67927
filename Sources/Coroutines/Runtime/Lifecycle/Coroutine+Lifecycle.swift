import CCoroutines
import Synchronization

extension Coroutine {
    // MARK: Cancellation

    /// Cancels the coroutine and, recursively, the coroutines launched from inside it.
    ///
    /// If the coroutine is suspended in any suspending operation it is woken and that operation
    /// throws `CancellationError`; every later suspending operation throws at once. If a peer had
    /// already completed the operation, the operation returns normally and the cancellation is
    /// seen at the next suspending call (SPEC §4.4). A coroutine cancelled before it started never
    /// runs its body and finishes with `CancellationError`. Cancelling a finished coroutine does
    /// nothing.
    ///
    /// - Suspends: no. Idempotent; callable from any thread.
    /// - Complexity: O(number of descendants).
    public func cancel() {
        // Iterative, not recursive: a chain of thousands of generations must not overflow the
        // caller's stack.
        var pending: [Coroutine] = [self]
        while let c = pending.popLast() {
            if c.withShared({ $0.finished }) { continue }
            if c.cancelledFlag.exchange(true, ordering: .sequentiallyConsistent) { continue }
            c.interruptWait(.cancelled)
            c.withShared { s in
                var child = s.firstChild
                while let x = child {
                    pending.append(x.takeUnretainedValue())
                    child = x._withUnsafeGuaranteedRef { $0.nextSibling }
                }
            }
        }
    }

    /// Cancels the coroutine once `duration` has elapsed (unless it finished first; the timer is
    /// then released).
    ///
    /// - Suspends: no. Callable from any thread; the timer runs on the coroutine's scheduler.
    /// - Complexity: O(log timers).
    public func cancel(after duration: Duration) {
        let deadline = deadlineNanoseconds(after: duration)
        // A strong capture (a weak one would give the coroutine a side table and slow every
        // retain): the timer is released when the coroutine finishes, which ends the cycle.
        let handle = scheduler.scheduleTimer(deadline: deadline) { self.cancel() }
        let finished = withShared { s in
            if s.finished { return true }
            s.cancelTimers.append(handle)
            return false
        }
        if finished { handle.cancel() }
    }

    // MARK: Joining

    /// Suspends the calling coroutine until this coroutine has finished.
    ///
    /// Any number of coroutines may join; all are woken. Returns normally whatever the body threw
    /// (read ``error``).
    ///
    /// - Throws: `CoroutineError.notInCoroutine` outside a coroutine; `CoroutineError.joinSelf`
    ///   when joining itself; `CancellationError` if the caller is (or becomes) cancelled.
    /// - Suspends: yes, unless already finished; resumes on the caller's own scheduler.
    /// - Complexity: O(1) to register; O(joiners) to cancel a join.
    public func join() throws {
        try Coroutine.withCurrent { me in
            if me === self { throw CoroutineError.joinSelf }
            try me.wait(.join, register: { ticket in
                withShared { s in
                    if s.finished { return true }
                    s.joiners.append(.coroutine(ticket))
                    return false
                }
            }, unregister: { ticket in
                withShared { s in
                    s.joiners.removeAll { if case .coroutine(let t) = $0 { return t.matches(ticket) } else { return false } }
                }
            })
        }
    }

    // MARK: Finishing

    /// Records the end of the body, wakes joiners, unlinks from the parent and reports an
    /// unobserved error. Runs on the coroutine's stack or, for unstarted coroutines, anywhere.
    func finish(error: (any Error)?, bodyRan: Bool = true) {
        status = .finished
        // Most coroutines end with neither joiners nor cancel timers: the lists are then left
        // untouched (moving an empty array still costs reference counting).
        var timers: [TimerHandle]?
        var joiners: [Joiner]?
        withShared { s in
            s.finished = true
            if let error { s.error = error }
            if !s.cancelTimers.isEmpty { timers = s.cancelTimers; s.cancelTimers = [] }
            if !s.joiners.isEmpty { joiners = s.joiners; s.joiners = [] }
        }
        if let timers { for t in timers { t.cancel() } }
        if let joiners {
            for joiner in joiners {
                switch joiner {
                case .coroutine(let ticket): ticket.resume()
                case .continuation(_, let continuation): continuation.resume()
                }
            }
        }
        // Only errors thrown by a body are reported (§4.5), not the reason a body never ran.
        if let error, bodyRan, reportsUnobservedErrors, joiners == nil, !(error is CancellationError) {
            let handler = Coroutine.unobservedErrorHandler
            scheduler.execute { [self] in handler(self, error) }
        }
        // Taken, not copied: the reference is given up here anyway.
        if let parent = parent.take() {
            parent.withShared { s in
                let (previous, next) = (previousSibling, nextSibling)
                if let previous {
                    previous._withUnsafeGuaranteedRef { $0.nextSibling = next }
                } else {
                    s.firstChild = next
                }
                next?._withUnsafeGuaranteedRef { $0.previousSibling = previous }
            }
            previousSibling = nil
            nextSibling = nil
        }
    }

    /// Finishes a coroutine whose body never ran (cancelled before start, stopped scheduler, no
    /// stack). Callers may merely borrow it: the registry's reference, given back here, can be
    /// the only one (a `Coroutine.async` coroutine has no other), so it holds one of its own.
    func finishUnstarted(_ error: any Error) {
        let keep = Unmanaged.passRetained(self)
        // The body keeps the observer alive (see `unstartedObserver`): released only after it.
        let body = self.body.take()
        unstartedObserver?.coroutineNeverRan(error)
        withExtendedLifetime(body) {}
        finish(error: error, bodyRan: false)
        scheduler.unregister(self)
        keep.release()
    }
}

/// Converts a duration to an absolute monotonic deadline in nanoseconds (saturating).
@usableFromInline
func deadlineNanoseconds(after duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    let now = ccoro_now_ns()
    if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return now }
    let ns = UInt64(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000)
    if ns.overflow { return .max }
    let total = ns.partialValue.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
    if total.overflow { return .max }
    let deadline = now.addingReportingOverflow(total.partialValue)
    return deadline.overflow ? .max : deadline.partialValue
}
