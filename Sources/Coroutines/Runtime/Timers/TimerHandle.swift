/// A timer armed from any thread on some scheduler; `cancel()` releases it from any thread.
final class TimerHandle: @unchecked Sendable {
    let scheduler: CoroutineScheduler
    var node: TimerNode?          // confined to scheduler's thread
    var cancelled = false         // confined to scheduler's thread

    init(scheduler: CoroutineScheduler) { self.scheduler = scheduler }

    /// Removes the timer if it has not fired. Any thread.
    func cancel() {
        if scheduler.isOnOwnThread {
            cancelOnThread()
        } else {
            scheduler.execute { self.cancelOnThread() }
        }
    }

    private func cancelOnThread() {
        // A job of a stopped scheduler may run on a pool thread instead: its timers are gone.
        guard scheduler.isOnOwnThread else { return }
        cancelled = true
        if let node { scheduler.disarmTimer(node) }
        node = nil
    }
}
