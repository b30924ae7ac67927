import Synchronization

extension Coroutine {
    /// Cancels the coroutine and, recursively, the coroutines launched from inside it.
    ///
    /// If the coroutine is suspended in any suspending operation it is woken and that operation
    /// throws `CancellationError`; every later suspending operation throws at once. If a peer had
    /// already completed the operation, the operation returns normally and the cancellation is
    /// seen at the next suspending call (see <doc:Cancellation>). One exception: a
    /// ``CoroutineActor/request(_:)`` handed directly to an idle actor on the caller's scheduler
    /// is woken only once the actor suspends, switches away or ends, unless it answered first
    /// (<doc:Actors>). A coroutine cancelled before it started never
    /// runs its body and finishes with `CancellationError`. Cancelling a finished coroutine does
    /// nothing.
    ///
    /// - Suspends: no. Idempotent; callable from any thread.
    /// - Complexity: O(number of descendants). A coroutine's lock, which its launches and its
    ///   finishing children take, is held for at most 256 children at a time.
    public func cancel() {
        // Iterative, not recursive: a chain of thousands of generations must not overflow the
        // caller's stack.
        var pending: [Coroutine] = [self]
        while let c = pending.popLast() {
            if c.withShared({ $0.finished }) { continue }
            if c.cancelledFlag.exchange(true, ordering: .sequentiallyConsistent) { continue }
            c.interruptWait(.cancelled)
            c.collectChildren(into: &pending)
        }
    }

    /// Appends the children of this coroutine, which was just marked cancelled by the caller, to
    /// `pending`: in chunks of 256, releasing the lock between them, so that its children
    /// finishing on other threads (they unlink under it) wait for one chunk at most. Between
    /// chunks the position is `cancelCursor`, which a finishing child moves on; no child is linked
    /// once the flag is set (`joinChildren`), so the walk ends.
    ///
    /// `chunk` and `betweenChunks` (run with the lock released) are for tests.
    func collectChildren(into pending: inout [Coroutine], chunk: Int = 256, betweenChunks: () -> Void = {}) {
        var more = withShared { s in
            s.cancelCursor = s.firstChild
            return s.cancelCursor != nil
        }
        while more {
            more = withShared { s in
                var child = s.cancelCursor
                var visited = 0
                while let x = child, visited < chunk {
                    pending.append(x.takeUnretainedValue())
                    child = x._withUnsafeGuaranteedRef { $0.nextSibling }
                    visited += 1
                }
                s.cancelCursor = child
                return child != nil
            }
            if more {
                betweenChunks()
                sharedLock.pauseForWaiters()
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
        // On a stopped scheduler the coroutine is finished or being cancelled: cancel it now.
        let handle = scheduler.scheduleTimer(deadline: deadline, { self.cancel() },
                                             onStopped: { self.cancel() })
        let finished = withShared { s in
            if s.finished { return true }
            s.cancelTimers.append(handle)
            return false
        }
        if finished { handle.cancel() }
    }
}
