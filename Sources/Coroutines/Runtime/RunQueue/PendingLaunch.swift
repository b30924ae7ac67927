/// A `Coroutine.async` launched from a coroutine onto its own scheduler, queued before its
/// ``Coroutine`` object exists.
///
/// The coroutine object is created when the launch reaches the head of the run queue
/// (``CoroutineScheduler/materializeLaunch()``), right before it first runs. A coroutine that
/// runs to its end without suspending (a leaf of a fan-out) is then allocated and freed while
/// its memory is still in the cache, and glibc hands the same block to the next one; created at
/// launch, a million such objects were allocated in one pass and touched again, cold, in a
/// second pass.
///
/// Invariants (all on the scheduler's thread; nothing here is shared):
/// - Each pending launch is in `CoroutineScheduler.pendingLaunches` and matched by one
///   ``CoroutineScheduler/launchMarker`` in the run queue; the n-th marker stands for the n-th
///   pending launch, so launches still start in launch order among everything queued.
/// - `parent` is retained until the launch is materialized; that reference becomes the child's
///   `parent`. The child starts cancelled if the parent was cancelled meanwhile, as an admitted
///   child would have been cancelled with it.
/// - `observer` (the promise) is kept alive by the body, which captures it (the queue keeps the
///   body beside this record: see ``PendingLaunchQueue``).
/// - A `cancelAll` of the scheduler cancels the pending launches queued before it
///   (`cancelAllCount`): the coroutines they stand for were live.
/// - The promise links its coroutine when the body starts (`runLazilyStartedCoroutineBody`),
///   under its lock: a promise cancelled before then is already rejected, and the body does not
///   run. A promise fulfilled or rejected by other code meanwhile does not stop the body
///   (<doc:Promises>), as with a coroutine created at launch.
struct PendingLaunch {
    unowned(unsafe) var observer: any UnstartedObserver
    /// The launching coroutine, retained (+1) for the launch.
    var parent: Unmanaged<Coroutine>
    /// The scheduler's `cancelAllCount` at launch: if it moved before the coroutine is created,
    /// a `cancelAll` (stop, runBlocking's body threw, Coroutine.run's task was cancelled) would
    /// have cancelled it, even if its parent has finished since, and it starts cancelled.
    var cancelAllCount: Int
}
