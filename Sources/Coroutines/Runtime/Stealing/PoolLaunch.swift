/// A pool launch that has not started: what a scheduler of the pool needs to start it (see
/// <doc:PoolsAndStealing>).
///
/// Either an unstarted ``Coroutine`` created at launch (`Coroutine.launch`, or a named or sized
/// `Coroutine.async`), or the parts of a `Coroutine.async` whose coroutine object is created by
/// the scheduler that starts it (as ``PendingLaunch`` on one scheduler): its body, the promise
/// told if it never runs, and the launching coroutine.
///
/// Ownership: a `PoolLaunch` owns one reference to `coroutine` and one to `parent`. It moves
/// between queues bit for bit (``LaunchQueue`` copies its words; a move, never a copy, so the
/// references move with it) until a scheduler takes it to start it
/// (``CoroutineScheduler/startPoolLaunch(_:)``), which consumes them. `@unchecked Sendable`:
/// it crosses threads only through those queues, whose protocols order every access.
struct PoolLaunch: @unchecked Sendable {
    /// The unstarted coroutine (+1), or nil for a launch whose coroutine is created at start.
    var coroutine: Unmanaged<Coroutine>?
    /// The body of a launch whose coroutine is created at start; it keeps `observer` alive.
    var body: (() throws -> Void)?
    /// Told if the body never runs (the promise of `Coroutine.async`).
    unowned(unsafe) var observer: (any UnstartedObserver)?
    /// The launching coroutine (+1), linked as the parent when the coroutine is created.
    var parent: Unmanaged<Coroutine>?

    /// A launch of an already created, unstarted coroutine; takes over `entry`'s reference.
    init(coroutine entry: Unmanaged<Coroutine>) {
        coroutine = entry
    }

    /// A launch whose coroutine is created when it starts. `parent`'s reference (+1) is the
    /// launch's.
    init(body: consuming @escaping () throws -> Void, observer: any UnstartedObserver, parent: Unmanaged<Coroutine>?) {
        self.body = body
        self.observer = observer
        self.parent = parent
    }

    /// Its size in machine words, as ``LaunchQueue`` slots store it.
    static let wordCount = 6
}
