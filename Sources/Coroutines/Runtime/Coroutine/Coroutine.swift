import CCoroutines
import Synchronization

/// A stackful coroutine: a body that runs on its own stack on one ``CoroutineScheduler`` and can
/// suspend from any depth of ordinary synchronous calls without blocking the thread.
///
/// ```swift
/// let c = Coroutine.launch(name: "worker") {
///     try Coroutine.delay(.milliseconds(10))     // suspends; the thread runs other coroutines
///     print("done")
/// }
/// try c.join()                                  // from another coroutine
/// ```
///
/// ## Threading
/// A coroutine runs on exactly one scheduler, whose single thread it never leaves: it always
/// resumes on the thread where it suspended (see <doc:ThreadsSchedulersAndCoroutines>). The handle
/// is `Sendable`: `cancel()`, `isCancelled`, `isFinished`, `error` and `join` may be used from any
/// thread.
///
/// ## Lifecycle
/// `launch` queues the coroutine; its stack is taken when it first runs and returned to a pool
/// when it finishes. Cancelling a coroutine cancels the coroutines launched from inside it.
public final class Coroutine: @unchecked Sendable, Hashable, CustomStringConvertible {
    // The fields touched by every suspension and wake come first, so that they share the
    // object's first cache line (a channel hand-off between thousands of coroutines misses the
    // cache on each coroutine it wakes).

    /// The scheduler that runs this coroutine: fixed when the coroutine starts, and for a launch
    /// onto a specific scheduler, at launch. Before a pool launch starts, the scheduler whose
    /// queue holds it at that moment (the pool's first scheduler while it is in the pool's
    /// shared queue); it may change until the start (<doc:PoolsAndStealing>).
    /// - Complexity: O(1). Thread-safe.
    public var scheduler: CoroutineScheduler { placement.takeUnretainedValue() }
    /// ``scheduler`` without a reference (`schedulerOwner` keeps it alive).
    @inlinable var placement: Unmanaged<CoroutineScheduler> { placementValue.load(ordering: .relaxed) }
    /// Written before the coroutine starts by the thread that queues or takes its launch, and
    /// never after it started; read by any thread.
    @usableFromInline let placementValue: Atomic<Unmanaged<CoroutineScheduler>>
    /// The stack and saved context while the coroutine owns a stack. Confined to the scheduler's
    /// thread.
    @usableFromInline @exclusivity(unchecked) var record: UnsafeMutablePointer<ccoro_stack_record>?
    /// Active `withTimeout` scopes, innermost last. Confined to the scheduler's thread.
    @exclusivity(unchecked) var timeoutScopes: [TimeoutScope] = []
    /// How many of `timeoutScopes` have expired, so that the check before every suspending
    /// operation reads one word. Confined to the scheduler's thread.
    @usableFromInline @exclusivity(unchecked) var expiredTimeoutScopes = 0
    /// Even: not waiting. Odd: a suspension is armed; a waker claims it by moving it to the next
    /// even value (compare-and-swap), so exactly one of completion, cancellation and timeout wins.
    /// Any thread.
    @usableFromInline let epoch = Atomic<UInt64>(0)
    /// Why the last suspension ended. Written by the claimer before it enqueues the coroutine
    /// (the enqueue orders it before the read after resumption).
    @usableFromInline @exclusivity(unchecked) var wakeReason = WakeReason.completed
    @usableFromInline let cancelledFlag = Atomic<Bool>(false)
    @usableFromInline let statusValue = Atomic<UInt8>(CoroutineStatus.created.rawValue)
    @usableFromInline let waitKindValue = Atomic<UInt8>(WaitKind.none.rawValue)
    /// Whether the coroutine was switched to at least once (the first switch enters the
    /// trampoline and uses `ccoro_switch_jump`). Confined to the scheduler's thread.
    @exclusivity(unchecked) var hasRun = false
    /// Set by an actor's mailbox as the actor parks in it with the request of its
    /// `directRequester` answered: the suspension switches straight back to that requester
    /// (`Mailbox` invariant 8). Confined to the scheduler's thread.
    @usableFromInline @exclusivity(unchecked) var switchesBackToRequester = false
    /// Whether `directRequester` is set: tested by every suspension, so kept in the object's
    /// first cache line (the pointer is not). Confined to the scheduler's thread.
    @usableFromInline @exclusivity(unchecked) var hasDirectRequester = false

    /// The requester waiting directly for this coroutine, an actor's (`Mailbox` invariant 7):
    /// its suspension then switches back to it, or resumes or gives it up first
    /// (``CoroutineScheduler/switchAway(from:)``). Not retained: it cannot end before it is
    /// resumed. Confined to the scheduler's thread.
    @usableFromInline @exclusivity(unchecked) var directRequester: Unmanaged<Coroutine>? {
        didSet { hasDirectRequester = directRequester != nil }
    }

    /// The name given at launch, used by `dumpAll()`, errors and the stack-overflow report.
    public let name: String?
    /// Normalised stack size in bytes.
    let stackSize: Int
    /// Whether an error thrown by the body is reported to `unobservedErrorHandler` if nobody joins.
    let reportsUnobservedErrors: Bool
    /// Whether it was created as a pool launch, before its scheduler was final (`launch(on:
    /// pool)`, a named `async`): `schedulerOwner` is then its ``SchedulerPool``, and ``start(parent:)``
    /// queues it in the pool. (A pool launch whose coroutine is created by the scheduler that
    /// starts it is placed for good from its creation: false.)
    let isPoolLaunch: Bool
    /// Keeps ``scheduler`` alive: the scheduler itself, or for a pool launch, its pool.
    let schedulerOwner: AnyObject
    /// Told when the body never runs (the promise of `Coroutine.async`, runBlocking's result).
    /// Not retained: every observer is captured by `body`, which keeps it alive for as long as
    /// it can be told (`finishUnstarted` tells it before letting the body go). Once the body
    /// has been taken to run, it is read again only while `directRequester` is set or the
    /// coroutine is parked unarmed (an actor's mailbox, alive while its body runs).
    unowned(unsafe) let unstartedObserver: (any UnstartedObserver)?

    // MARK: Confined to the scheduler's thread

    /// The body; released as soon as it returns (or if it never runs).
    @exclusivity(unchecked) var body: (() throws -> Void)?
    /// NUL-terminated copy of `name` for the signal handler.
    @exclusivity(unchecked) var cName: UnsafeMutablePointer<CChar>?

    // MARK: Guarded by `sharedLock`

    /// Guards `sharedState` (and, of a parent, its children's sibling links). A spin lock: its
    /// critical sections only move a few fields and links (see ``SpinLock``).
    let sharedLock = SpinLock()
    /// Read and written only inside ``withShared(_:)``. Any thread.
    @exclusivity(unchecked) var sharedState = SharedState()

    /// Runs `body` with the join/finish state, holding `sharedLock`. Never suspend or call user
    /// code inside. (The state is touched only after `lock()`: passing `&sharedState` to a helper
    /// that locks would begin the access before the lock is held.)
    @inline(__always)
    func withShared<R>(_ body: (inout SharedState) throws -> R) rethrows -> R {
        sharedLock.lock()
        defer { sharedLock.unlock() }
        return try body(&sharedState)
    }
    struct SharedState {
        var finished = false
        var error: (any Error)?
        var joiners = JoinerQueue()
        var cancelTimers: [TimerHandle] = []
        /// Not retained: a live child is kept alive by its scheduler's registry, and unlinks
        /// itself when it finishes.
        var firstChild: Unmanaged<Coroutine>?
        /// The next child that ``cancel()``'s walk of this coroutine's children visits, between
        /// two of its chunks; a finishing child that is the cursor moves it on as it unlinks.
        /// Only one walk happens (the canceller that set `cancelledFlag`), and no child is linked
        /// once that flag is set.
        var cancelCursor: Unmanaged<Coroutine>?
    }
    /// The coroutine this one was launched from; cleared when this one finishes.
    /// Guarded by `parent.sharedLock` for the sibling links.
    @exclusivity(unchecked) var parent: Coroutine?
    // Guarded by the parent's `sharedLock`; not retained (see `SharedState.firstChild`), and
    // `Unmanaged` so that walking and unlinking the list costs no reference counting.
    @exclusivity(unchecked) var previousSibling: Unmanaged<Coroutine>?
    @exclusivity(unchecked) var nextSibling: Unmanaged<Coroutine>?

    // MARK: Guarded by `scheduler.registry`

    // The registry holds one reference to each entry (taken in `admit`, given back by
    // `unregister`, or by the loop after `reap`); the links themselves are `Unmanaged`, so that linking and unlinking costs
    // no reference counting.
    @exclusivity(unchecked) var registryPrevious: Unmanaged<Coroutine>?
    @exclusivity(unchecked) var registryNext: Unmanaged<Coroutine>?

    // MARK: Owned by the incoming queue that holds it

    /// The link of the scheduler's incoming queue while the coroutine is in it (the entry
    /// pushed before it), ``WakeUpQueue/notQueued`` otherwise (see ``WakeUpQueue``: it is in at
    /// most one queue at a time). Written by the thread that pushes it, read by the one that
    /// takes it off, ordered by the queue's atomic head. None of the other links can serve: a
    /// queued coroutine is still registered and linked to its parent and siblings.
    @exclusivity(unchecked) var wakeUpLink: UInt = WakeUpQueue.notQueued

    /// Creates a coroutine that runs on `scheduler`, or, if `pool` is not nil, a pool launch
    /// queued first on `scheduler` (one of `pool`'s schedulers).
    @usableFromInline
    init(scheduler: CoroutineScheduler, pool: SchedulerPool? = nil, name: String?, stackSize: Int?,
         reportsUnobservedErrors: Bool,
         unstartedObserver: (any UnstartedObserver)?, body: @escaping () throws -> Void) {
        placementValue = Atomic(.passUnretained(scheduler))
        isPoolLaunch = pool != nil
        schedulerOwner = pool ?? scheduler
        self.name = name
        self.stackSize = StackAllocator.normalizedSize(stackSize)
        self.reportsUnobservedErrors = reportsUnobservedErrors
        self.unstartedObserver = unstartedObserver
        self.body = body
    }

    // MARK: Launching

    /// Starts a coroutine that runs `body` on `scheduler`.
    ///
    /// The body never runs inline: it is queued and starts after the caller returns to its
    /// scheduler (or, from a plain thread, asynchronously). Launched onto one scheduler,
    /// coroutines start in launch order (pool launches follow the pool's order, newest first among
    /// a scheduler's 16 newest: <doc:PoolsAndStealing>). A coroutine launched from inside another is its child: cancelling the parent
    /// cancels it. An error the body throws is kept in ``error``; if no coroutine is joining when
    /// the body ends, it is also passed to ``unobservedErrorHandler`` (except `CancellationError`).
    ///
    /// Without `on:`, from a coroutine or job of a ``SchedulerPool`` scheduler, or from a plain
    /// thread, this is a *pool launch* (as ``launch(on:name:stackSize:_:)-(SchedulerPool,_,_,_)``
    /// onto that pool, or onto `SchedulerPool.default(for: .default)`): the coroutine may start
    /// on another scheduler of the pool, in parallel with the launcher (<doc:PoolsAndStealing>).
    ///
    /// - Parameters:
    ///   - scheduler: Where the coroutine runs; it never moves. `nil`: the current coroutine's
    ///     scheduler, else the scheduler the current thread drives, else
    ///     `CoroutineScheduler.main` on the main thread (each a pool launch if it is a pool
    ///     scheduler), else a pool launch onto `SchedulerPool.default(for: .default)`.
    ///   - name: A name for diagnostics (`dumpAll()`, the stack-overflow report).
    ///   - stackSize: Bytes of stack; `nil` means 256 KiB. Rounded up to a multiple of 16 KiB.
    ///     Must be in `1...64 MiB` (otherwise a precondition failure).
    ///   - body: The code to run. It may call suspending operations.
    /// - Returns: The coroutine's handle. If no stack can be allocated it finishes with
    ///   `CoroutineError.stackUnavailable`; on a stopped scheduler with
    ///   `CoroutineError.schedulerStopped`; in a child made by `fork()`, at once, with
    ///   `CoroutineError.forkedProcess` (<doc:BlockingAndStopping>).
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(1).
    @discardableResult
    public static func launch(on scheduler: CoroutineScheduler? = nil, name: String? = nil,
                              stackSize: Int? = nil,
                              _ body: consuming @escaping @Sendable () throws -> Void) -> Coroutine {
        let (target, pool) = scheduler.map { (Unmanaged.passUnretained($0), nil) } ?? CoroutineScheduler.defaultPlacement()
        let c = Coroutine(scheduler: target.takeUnretainedValue(), pool: pool?.takeUnretainedValue(), name: name,
                          stackSize: stackSize, reportsUnobservedErrors: true, unstartedObserver: nil, body: consume body)
        c.startUnderCurrent()
        return c
    }

    /// Starts a coroutine on a scheduler of `pool`: a *pool launch*.
    ///
    /// It is queued on the calling thread's scheduler if that belongs to `pool` (else in the
    /// pool's shared queue), and started by whichever of the pool's schedulers is free first: an
    /// idle scheduler takes unstarted launches from a busy one. Its thread is fixed when it starts
    /// and never changes after (<doc:PoolsAndStealing>). Unlike a launch onto one scheduler, it
    /// may start while the launcher is still running, in parallel with it. Everything else is as
    /// for ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``: a child of the launching
    /// coroutine, cancelled with it wherever it runs.
    ///
    /// - Parameters:
    ///   - pool: The pool whose schedulers may run it.
    ///   - name: As for ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``.
    ///   - stackSize: As for ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``.
    ///   - body: As for ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``.
    /// - Returns: The coroutine's handle; its ``scheduler`` is fixed once it starts. On a stopped
    ///   pool it finishes with `CoroutineError.schedulerStopped`; in a child made by `fork()`, at
    ///   once, with `CoroutineError.forkedProcess`.
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(1) amortised.
    @discardableResult
    public static func launch(on pool: SchedulerPool, name: String? = nil, stackSize: Int? = nil,
                              _ body: consuming @escaping @Sendable () throws -> Void) -> Coroutine {
        let c = Coroutine(scheduler: pool.firstPlacement(), pool: pool, name: name, stackSize: stackSize,
                          reportsUnobservedErrors: true, unstartedObserver: nil, body: consume body)
        c.startUnderCurrent()
        return c
    }

    /// Starts a coroutine that computes a value and returns a promise of it.
    ///
    /// The promise is fulfilled with the body's result or rejected with what it throws (such
    /// errors are not reported as unobserved). Cancelling the promise cancels the coroutine.
    /// Without `on:`, from a pool scheduler or a plain thread, this is a pool launch, as for
    /// ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``.
    ///
    /// Launched without a name or stack size from a coroutine onto its own scheduler (a fan-out),
    /// or as a pool launch, the coroutine object is only created right before it first runs, by
    /// the scheduler that runs it; nothing observable changes (`dumpAll()` lists it as
    /// `ready (not started)` until then).
    ///
    /// - Parameters: as for ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``.
    /// - Returns: A promise settled when the body ends (rejected at once with
    ///   `CoroutineError.forkedProcess` in a child made by `fork()`).
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(1).
    @inlinable
    public static func async<Value: Sendable>(on scheduler: CoroutineScheduler? = nil, name: String? = nil,
                                              stackSize: Int? = nil,
                                              _ body: consuming @escaping @Sendable () throws -> Value) -> Promise<Value> {
        let promise = Promise<Value>()
        // The promise keeps the body, so that the coroutine's closure captures the promise
        // alone: a closure whose only capture is one object uses it as its context, and
        // allocates nothing.
        promise.coroutineBody = consume body
        let (target, pool) = scheduler.map { (Unmanaged.passUnretained($0), nil) } ?? CoroutineScheduler.defaultPlacement()
        start(promise, on: target, pool: pool, name: name, stackSize: stackSize)
        return promise
    }

    /// Starts a coroutine on a scheduler of `pool` that computes a value, and returns a promise of
    /// it: a pool launch (as ``launch(on:name:stackSize:_:)-(SchedulerPool,_,_,_)``) of
    /// ``async(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``.
    ///
    /// - Parameters: as for ``launch(on:name:stackSize:_:)-(SchedulerPool,_,_,_)``.
    /// - Returns: A promise settled when the body ends (rejected at once with
    ///   `CoroutineError.forkedProcess` in a child made by `fork()`).
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(1) amortised.
    @inlinable
    public static func async<Value: Sendable>(on pool: SchedulerPool, name: String? = nil, stackSize: Int? = nil,
                                              _ body: consuming @escaping @Sendable () throws -> Value) -> Promise<Value> {
        let promise = Promise<Value>()
        promise.coroutineBody = consume body
        start(promise, on: .passUnretained(pool.firstPlacement()), pool: .passUnretained(pool), name: name,
              stackSize: stackSize)
        return promise
    }

    /// Queues the coroutine of `Coroutine.async` whose body `promise` holds: a pool launch if
    /// `pool` is not nil, else a launch onto `target`. Without a name or stack size, a pool
    /// launch, or a launch from a coroutine onto its own scheduler, is queued without its
    /// coroutine object (``PoolLaunch``, ``PendingLaunch``).
    @inlinable
    static func start<Value: Sendable>(_ promise: Promise<Value>, on target: Unmanaged<CoroutineScheduler>,
                                       pool: Unmanaged<SchedulerPool>?, name: String?, stackSize: Int?) {
        ccoro_check_stack_bound()   // a launch from a coroutine (<doc:Stacks>)
        if name == nil, stackSize == nil {
            if let pool {
                pool._withUnsafeGuaranteedRef {
                    $0.submitUncreated(body: { try promise.runLazilyStartedCoroutineBody() }, observer: promise)
                }
                return
            }
            // From a coroutine onto its own scheduler (the fan-out case), the coroutine object is
            // created only when the launch reaches the head of the run queue (`PendingLaunch`).
            if let p = ccoro_tls_coroutine() {
                let current = Unmanaged<Coroutine>.fromOpaque(p)
                let queued = current._withUnsafeGuaranteedRef { launcher in
                    launcher.placement.toOpaque() == target.toOpaque()
                        && target._withUnsafeGuaranteedRef {
                            $0.queueLaunch(body: { try promise.runLazilyStartedCoroutineBody() },
                                           observer: promise, parent: current)
                        }
                }
                if queued { return }
            }
        }
        // Nobody but the scheduler's registry (or the launch, until it starts) keeps this
        // coroutine: the reference it is created with becomes theirs.
        let c = Unmanaged.passRetained(Coroutine(scheduler: target.takeUnretainedValue(),
                                                 pool: pool?.takeUnretainedValue(), name: name,
                                                 stackSize: stackSize, reportsUnobservedErrors: false,
                                                 unstartedObserver: promise,
                                                 body: { try promise.runCoroutineBody() }))
        promise.link(c)
        Coroutine.startUnderCurrent(registryEntry: c)
    }

    /// ``start(parent:)`` with the coroutine running on this thread, if any, as the parent
    /// (borrowed: it is alive while it runs this code).
    @usableFromInline
    func startUnderCurrent() {
        Coroutine.startUnderCurrent(registryEntry: .passRetained(self))
    }

    /// ``startUnderCurrent()`` for the coroutine `entry`, whose reference (+1) becomes the one
    /// its scheduler's registry keeps.
    @usableFromInline
    static func startUnderCurrent(registryEntry entry: Unmanaged<Coroutine>) {
        entry._withUnsafeGuaranteedRef { c in
            if let p = ccoro_tls_coroutine() {
                ccoro_check_stack_bound()   // a launch from a coroutine (<doc:Stacks>)
                Unmanaged<Coroutine>.fromOpaque(p)._withUnsafeGuaranteedRef { c.start(parent: $0, registryEntry: entry) }
            } else {
                c.start(parent: nil, registryEntry: entry)
            }
        }
    }

    /// Links to the parent, registers with the scheduler and queues the first run.
    @usableFromInline
    func start(parent: Coroutine?) {
        start(parent: parent, registryEntry: .passRetained(self))
    }

    /// ``start(parent:)``, with `entry` (+1 on `self`) becoming the registry's reference (for a
    /// pool launch, the launch's until it starts).
    func start(parent: Coroutine?, registryEntry entry: Unmanaged<Coroutine>) {
        if ForkGuard.isForkedChild { return finishInForkedChild(entry) }
        if let parent { link(parent: parent) }
        if isPoolLaunch {
            unsafeDowncast(schedulerOwner, to: SchedulerPool.self).submit(PoolLaunch(coroutine: entry))
        } else {
            placement._withUnsafeGuaranteedRef { $0.admit(entry) }
        }
    }

    /// Joins `parent`'s children (cancelling the parent cancels this coroutine), or marks this
    /// coroutine cancelled if the parent already is. Before the coroutine is queued.
    func link(parent: Coroutine) {
        if joinChildren(of: .passUnretained(parent)) {
            // Only this coroutine reads `parent` (in `finish`), and it has not been queued yet.
            self.parent = parent
        }
    }

    /// ``link(parent:)`` with a reference (+1) to the parent that becomes `self.parent`, or is
    /// given back if the parent was cancelled.
    func link(parentReference parent: Unmanaged<Coroutine>) {
        if joinChildren(of: parent) {
            self.parent = parent.takeRetainedValue()
        } else {
            parent.release()
        }
    }

    /// Links into `parent`'s child list; false (and this coroutine marked cancelled) if the
    /// parent is cancelled. The critical section works on unretained references (the caller
    /// keeps both alive), so linking counts no references.
    private func joinChildren(of parent: Unmanaged<Coroutine>) -> Bool {
        let me = Unmanaged.passUnretained(self)
        let linked: Bool = parent._withUnsafeGuaranteedRef { p in
            p.withShared { s in
                if p.cancelledFlag.load(ordering: .sequentiallyConsistent) { return false }
                me._withUnsafeGuaranteedRef { $0.nextSibling = s.firstChild }
                s.firstChild?._withUnsafeGuaranteedRef { $0.previousSibling = me }
                s.firstChild = me
                return true
            }
        }
        if !linked { cancelledFlag.store(true, ordering: .sequentiallyConsistent) }
        return linked
    }

    // MARK: State

    /// Whether ``cancel()`` was called on this coroutine or an ancestor.
    /// - Complexity: O(1). Thread-safe.
    public var isCancelled: Bool { cancelledFlag.load(ordering: .relaxed) }

    /// Whether the body has returned or thrown (or the coroutine finished without running).
    /// - Complexity: O(1). Thread-safe.
    public var isFinished: Bool { withShared { $0.finished } }

    /// What the body threw, once finished (`nil` while running or after a normal return).
    /// - Complexity: O(1). Thread-safe.
    public var error: (any Error)? { withShared { $0.error } }

    @inlinable
    var status: CoroutineStatus {
        get { CoroutineStatus(rawValue: statusValue.load(ordering: .relaxed))! }
        set { statusValue.store(newValue.rawValue, ordering: .relaxed) }
    }

    // MARK: Hashable, CustomStringConvertible

    /// Identity: two handles are equal when they are the same coroutine. O(1), thread-safe.
    public static func == (lhs: Coroutine, rhs: Coroutine) -> Bool { lhs === rhs }
    /// Hashes the coroutine's identity. O(1), thread-safe.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The name (or an address) and the scheduler's name.
    public var description: String {
        "Coroutine(\(name.map { "\"\($0)\"" } ?? "0x" + String(UInt(bitPattern: ObjectIdentifier(self).hashValue), radix: 16)) on \(scheduler.name))"
    }
}

/// The lifecycle state of a coroutine.
@usableFromInline
enum CoroutineStatus: UInt8 {
    case created, ready, running, suspended, finished
}

/// What a suspended coroutine waits for (for `dumpAll()`).
@usableFromInline
enum WaitKind: UInt8 {
    case none, delay, yield, promise, join, readable, writable, task, channel, select, mutex, semaphore, waitGroup, other,
         offload, callback, actorRequest
}

/// Why a suspension ended.
@usableFromInline
enum WakeReason: UInt8 {
    case completed, cancelled, timedOut
}

/// Told when a coroutine finishes without running its body (cancelled before start, stopped
/// scheduler, no stack); and, for an actor's coroutine (whose observer is its ``Mailbox``), when
/// it suspends while a requester waits directly for it.
@usableFromInline
protocol UnstartedObserver: AnyObject, Sendable {
    func coroutineNeverRan(_ error: any Error)
    /// `c`, whose `directRequester` is set, suspends or switches straight to another coroutine
    /// without switching back to it: resumes or gives up that requester (`Mailbox` invariant 8).
    /// On `c`'s scheduler thread.
    func coroutineLeavesDirectRequester(_ c: Coroutine)
    /// `c`, an actor's coroutine parked unarmed in its mailbox (`Mailbox` invariant 12), gets
    /// its wait armed by its scheduler's loop. On `c`'s scheduler thread.
    func armWaitOwnedByThread(_ c: Coroutine)
}

extension UnstartedObserver {
    @usableFromInline
    func coroutineLeavesDirectRequester(_ c: Coroutine) {}
    @usableFromInline
    func armWaitOwnedByThread(_ c: Coroutine) {}
}
