import Synchronization

/// A timer armed from any thread on some scheduler; `cancel()` releases it from any thread.
///
/// If the scheduler stops with the timer armed, the timer moves to a pool scheduler with a new
/// handle (``CoroutineScheduler/handOverTimers()``), and this one forwards `cancel()` to it:
/// a cancel that reaches the stopped scheduler runs on a pool thread, marks `successor` released
/// and cancels the new handle if it is there; a hand-over that finds it released cancels the new
/// handle at once. Either order releases it.
final class TimerHandle: @unchecked Sendable {
    let scheduler: CoroutineScheduler
    /// What the timer runs; kept here so that a stopping scheduler can re-arm it elsewhere.
    let action: @Sendable () -> Void
    var node: TimerNode?          // confined to scheduler's thread
    var cancelled = false         // confined to scheduler's thread
    /// Whether a cancel reached the stopped scheduler, and the handle of the timer it handed over.
    private let successor = Mutex<(released: Bool, next: TimerHandle?)>((false, nil))

    init(scheduler: CoroutineScheduler, action: @escaping @Sendable () -> Void) {
        self.scheduler = scheduler
        self.action = action
    }

    /// Removes the timer if it has not fired. Any thread.
    func cancel() {
        if scheduler.isOnOwnThread {
            cancelOnThread()
        } else {
            scheduler.execute { self.cancelOnThread() }
        }
    }

    /// Records the handle of this timer re-armed on a pool scheduler by this handle's stopping
    /// scheduler; cancels it at once if this handle was cancelled meanwhile.
    func handOver(to next: TimerHandle) {
        let releasedAlready = successor.locked { s in
            s.next = next
            return s.released
        }
        if releasedAlready { next.cancel() }
    }

    private func cancelOnThread() {
        // A job of a stopped scheduler runs on a pool thread instead: its timers are gone from
        // here, and one handed over is released through its new handle.
        guard scheduler.isOnOwnThread else {
            let next = successor.locked { s in
                s.released = true
                return s.next
            }
            next?.cancel()
            return
        }
        cancelled = true
        if let node { scheduler.disarmTimer(node) }
        node = nil
    }
}
