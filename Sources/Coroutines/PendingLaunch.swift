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
/// - `parent` is retained until the launch is materialized: the child is linked to it then, and
///   starts cancelled if the parent was cancelled meanwhile, as an admitted child would have
///   been cancelled with it.
/// - `observer` (the promise) is kept alive by `body`, which captures it.
/// - A promise cancelled before its coroutine exists is rejected at once; its coroutine is
///   created cancelled and never runs the body (``LazyLaunchObserver/linkStartingCoroutine(_:)``).
struct PendingLaunch {
    var body: () throws -> Void
    unowned(unsafe) var observer: any LazyLaunchObserver
    var parent: Unmanaged<Coroutine>

    /// - Parameter parent: The launching coroutine, retained (+1) for the launch.
    init(body: @escaping () throws -> Void, observer: any LazyLaunchObserver, parent: Unmanaged<Coroutine>) {
        self.body = body
        self.observer = observer
        self.parent = parent
    }

    /// The body, moved out (the launch is used up).
    consuming func takeBody() -> () throws -> Void {
        body
    }
}

/// The observer of a lazily created coroutine (the promise of `Coroutine.async`).
@usableFromInline
protocol LazyLaunchObserver: UnstartedObserver {
    /// Links the coroutine just created for this launch (cancelling the promise cancels it).
    /// Returns false if the promise was settled (cancelled) before: the coroutine must start
    /// cancelled. Called once, on the coroutine's scheduler thread.
    func linkStartingCoroutine(_ c: Unmanaged<Coroutine>) -> Bool
}
