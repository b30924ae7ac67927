import CCoroutines
import Dispatch
import Synchronization

/// Timers on the scheduler's loop: armed from any thread (``scheduleTimer(deadline:_:)``) or by
/// the scheduler's own coroutines (`delay`, `withTimeout`, `select`), fired by the loop
/// (``runDueTimers()``) between coroutines.
extension CoroutineScheduler {
    /// Arms a timer from any thread. `action` runs on this scheduler's loop; if the scheduler
    /// stops before it fires, on a scheduler of the default pool (``handOverTimers()``).
    ///
    /// A timer armed from another thread after this scheduler has stopped is refused, as a launch
    /// is: `onStopped` runs instead of `action`, on a scheduler of the default pool, at once.
    @discardableResult
    func scheduleTimer(deadline: UInt64, _ action: @escaping @Sendable () -> Void,
                       onStopped: @escaping @Sendable () -> Void) -> TimerHandle {
        let handle = TimerHandle(scheduler: self, action: action)
        let arm: @Sendable () -> Void = { [self] in
            // The arming job was refused by a stopped scheduler and runs on a pool scheduler.
            guard isOnOwnThread else {
                onStopped()
                return
            }
            guard !handle.cancelled else { return }
            let node = armTimer(deadline: deadline) {
                handle.node = nil
                action()
            }
            node.handle = handle
            handle.node = node
        }
        if isOnOwnThread { arm() } else { execute(arm) }
        return handle
    }

    /// Arms a timer on this scheduler's heap. Scheduler thread only.
    /// - Complexity: O(log n) in the armed timers.
    @inline(__always)
    func armTimer(deadline: UInt64, _ action: @escaping () -> Void) -> TimerNode {
        let node = timers.schedule(deadline: deadline, action)
        armedTimerCount.store(timers.count, ordering: .relaxed)
        return node
    }

    /// Removes `node` from this scheduler's heap if it is still armed. Scheduler thread only.
    /// - Complexity: O(log n) in the armed timers.
    @inline(__always)
    func disarmTimer(_ node: TimerNode) {
        timers.remove(node)
        armedTimerCount.store(timers.count, ordering: .relaxed)
    }

    /// Fires the timers whose deadline has passed: runs their actions on the loop's stack.
    func runDueTimers() {
        guard timers.count > 0 else { return }
        let now = ccoro_now_ns()
        while let t = timers.popDue(now: now) {
            armedTimerCount.store(timers.count, ordering: .relaxed)
            let action = t.action
            t.action = nil
            action?()
        }
    }

    /// Arms the timeout of a waiting `select`: when it fires, it claims the select's ticket and
    /// records `index` as the winning case. Confined to the scheduler's thread.
    @usableFromInline
    func scheduleSelectTimeout(deadline: UInt64, _ ticket: WaitTicket,
                               _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int) -> AnyObject {
        armTimer(deadline: deadline) {
            guard ticket.tryClaim() else { return }
            outcome.pointee.caseIndex = index
            ticket.wakeClaimed()
        }
    }

    /// Releases a select timeout armed by ``scheduleSelectTimeout(deadline:_:_:index:)``
    /// (nothing happens if it already fired).
    @usableFromInline
    func cancelSelectTimeout(_ timer: AnyObject) {
        if let node = timer as? TimerNode { disarmTimer(node) }
    }

    /// Empties the timers of a closing scheduler: they can never fire here. Those armed for
    /// other code (`Promise.timeout`, `cancel(after:)`) move to a pool scheduler with the same
    /// deadline; the rest belonged to coroutines, which have all finished.
    func handOverTimers() {
        while let t = timers.popDue(now: .max) {
            if let handle = t.handle {
                // A pool scheduler never stops: `onStopped` cannot run. The old handle forwards a
                // release to the new one (a timeout freed later still disarms its timer).
                let portable = handle.action
                handle.handOver(to: SchedulerPool.default(for: .default).next()
                    .scheduleTimer(deadline: t.deadline, portable, onStopped: portable))
            }
            t.action = nil
            t.handle = nil
        }
        armedTimerCount.store(0, ordering: .relaxed)
    }
}
