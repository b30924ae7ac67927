/// The timer behind the promise returned by `Promise.timeout(_:)`, and what keeps that promise
/// alive while it can still be observed.
///
/// The promise is settled by whichever comes first: the original's settlement (an observer on the
/// original) or the timer. Neither holds the promise strongly, so that a timeout nobody can
/// observe any more is freed with its timer at once, rather than when its deadline passes (a
/// timeout of an hour, abandoned 100,000 times, would otherwise keep 100,000 timers armed for an
/// hour).
///
/// Invariants (all under the promise's lock, except `deinit`):
/// * Owned by the promise's state (`PromiseStateMachine.timeout`) while the promise is pending;
///   dropped at its settlement, or freed with the promise. Either way `deinit` disarms the timer,
///   which is then due to nobody (nothing happens if it already fired).
/// * Who can observe a pending timeout promise holds it: code with a reference, and a coroutine
///   in `await()` (its frame holds the promise; its scheduler's registry holds the coroutine).
///   A Swift task in `value` and an observer (`then`, `catch`, …) are only stored in the promise
///   itself; from the first of them on, ``pinned`` holds the promise (a cycle through its own
///   state), so that it lives to be settled, by its original or by its timer. The cycle ends at
///   the settlement, which drops this object.
@usableFromInline
final class PromiseTimeout: @unchecked Sendable {   // `pinned` is guarded by the promise's lock
    /// Disarmed in `deinit`.
    let timer: TimerHandle
    /// The promise this timer belongs to; valid while that promise's state holds this object.
    private unowned(unsafe) let owner: AnyObject
    /// The owner itself once a task or an observer waits on it; nil before.
    private var pinned: AnyObject?

    init(timer: TimerHandle, owner: AnyObject) {
        self.timer = timer
        self.owner = owner
    }

    /// Keeps the owner alive until it settles. Called under the owner's lock, from one of its
    /// methods (so the owner is alive).
    @usableFromInline
    func pinOwner() {
        if pinned == nil { pinned = owner }
    }

    deinit { timer.cancel() }
}
