/// A scheduled timer: fires its action on its scheduler's loop at `deadline` unless removed.
///
/// Threading: confined to the owning scheduler's thread (other threads add and remove timers by
/// posting jobs to that scheduler).
final class TimerNode {
    let deadline: UInt64        // monotonic nanoseconds
    let sequence: UInt64        // tie-breaker: earlier-armed timers fire first
    var heapIndex = -1          // -1: not in a heap
    var action: (() -> Void)?
    /// For timers armed through `scheduleTimer`: their handle, which holds the action in a form
    /// runnable on another scheduler (``CoroutineScheduler/handOverTimers()``). A cycle with
    /// `handle.node` while armed, broken when the timer fires, is removed or is handed over.
    var handle: TimerHandle?

    init(deadline: UInt64, sequence: UInt64, action: @escaping () -> Void) {
        self.deadline = deadline
        self.sequence = sequence
        self.action = action
    }

    var isArmed: Bool { heapIndex >= 0 }
}
