import Synchronization

// The lifecycle of a scheduler: whether a thread drives it, whether its loop is parked in the
// poller, whether a stop was requested and acted on, and whether it has closed for good (what
// users see: <doc:BlockingAndStopping>, <doc:ThreadsSchedulersAndCoroutines>). It is one byte,
// `CoroutineScheduler.lifecycle`, so that a thread that only looks — a waker, `stop()`, the pool,
// the stall monitor — takes one load, and every change is one atomic read-modify-write of it
// (``AtomicSchedulerLifecycle/apply(_:kind:)``), which checks in debug builds that the change is
// one of the transitions below (``SchedulerLifecycle/next(after:from:kind:)``).
//
// The bits.
//   D  driven         a thread drives the scheduler (it is inside `drive`).
//   P  parked         the loop parks in the poller, or is about to, so a poster must wake it.
//   R  stopRequested  `stop()`, or its pool's `stop()`, was called.
//   H  stopHandled    the loop acted on R: it cancelled every coroutine, once.
//   C  closed         the loop has ended for good and the incoming queue is closed (see "The
//                     mirror of the incoming queue" below).
//
// States.
//   new       {}                created and not driven yet: a dedicated or pool scheduler until its
//                               thread starts its loop (a stop may come first: {R}); main while
//                               nothing drives it; a temporary one until `runBlocking` drives it.
//   running   {D}               the loop, a job or a coroutine runs on the driving thread.
//   parked    {D P}             the loop parks in the poller: from its announcement (P set)
//                               through its last look at its queues and the poll, until it, or a
//                               waker, clears P.
//   stopping  {D R}, {D P R}    a stop was requested; the loop has not acted on it yet.
//   draining  {D R H}, {D P R H} the loop cancelled every coroutine; it waits for them to end.
//   ended     {}, {R}, {R H}    the drive returned; main until `endMainRun`, the others until
//                               `close`, both on the thread that drove it, right after.
//   closed    {C}, {C R}, {C R H} final. Never main.
// A dedicated, pool or temporary scheduler is driven once: `ended` without R looks like `new`,
// and it is `close`, called right after the drive by the same thread, that tells them apart.
//
// Transitions (what each requires → what it changes; who makes it).
//   startDriving  ¬D ¬P ¬H ¬C, for main also ¬R → +D    the driving thread, entering `drive`.
//   park          D ¬P → +P                              the driving thread, when it runs out
//                                                         of work, before its last look.
//   unpark        D → −P                                 the driving thread, after the poll or
//                                                         its last look found work. A no-op if a
//                                                         waker cleared P already.
//   wake          any → −P                               any thread (`wakeLoop`); whoever
//                                                         clears P wakes the poller. A no-op
//                                                         without P.
//   requestStop   any → +R; main ¬D: no change           any thread (`requestStop`). The check
//                                                         of D and the setting of R are one
//                                                         compare-and-swap.
//   handleStop    D ¬P R ¬H → +H                         the driving thread, then it cancels
//                                                         every coroutine.
//   endDriving    D ¬P → −D                              the driving thread, leaving `drive`.
//   endMainRun    main, ¬D → −R −H                       the main thread, after `run()` or
//                                                         `runBlocking` on main, so that main
//                                                         can be driven again.
//   close         not main, ¬D ¬P ¬C → +C                the thread that drove it, after the
//                                                         drive, just before it closes the
//                                                         incoming queue.
// Every other change is illegal, and so is a transition from a state that lacks what it
// requires, or from a state not listed above.
//
// Who looks (one load each).
//   P    a poster into an empty incoming queue (`post`), to wake the loop.
//   R    the loop (`drive`'s end conditions, R without H: the stop to act on), launches onto the
//        scheduler (`admit`, `queueLaunch`, `startPoolLaunch`, the pool's `localQueue`).
//   D P  the stall monitor (busy: D without P).
//   C    nobody on a hot path: the debug checks (nothing drives a closed scheduler) and tests.
//
// Invariants.
// 1. P ⇒ D: only the driving thread sets P, while D, and clears D only without P.
// 2. H ⇒ R: H is set only with R, and the two are cleared together (main only).
// 3. C ⇒ ¬D ∧ ¬P, and C is never cleared: nothing drives a closed scheduler again. Main is never
//    closed.
// 4. Only the driving thread sets D, P, H and C and clears D, R and H; any other thread only sets
//    R and clears P. So the driving thread's loads of D, H and C are exact; of R and P, snapshots.
// 5. A stop of main is accepted only while D (one compare-and-swap): a `stop()` that races with
//    the end of a run cannot stop the next run, and main has R without D only between the end
//    of its drive and `endMainRun`.
//
// Orderings. Every transition is a sequentially consistent read-modify-write, and each look that
// pairs with one (below) is a sequentially consistent load. On x86-64 such a load is a plain
// `mov`, and a read-modify-write is one locked instruction, as a sequentially consistent store
// (`xchg`) is.
// Dekker's pattern, three times: each side writes, then reads what the other side writes, both
// sequentially consistent, so at least one of them sees the other.
//   a. Parking against a post. The loop sets P (`park`), then loads the incoming queue's head
//      (`hasEntriesOrdered`); a poster pushes onto an empty queue (a compare-and-swap of the
//      head), then loads this byte and, seeing P, wakes the loop (``WakeUpQueue``, "Wake-ups of a
//      parked loop").
//   b. Parking against a stop. The loop sets P, then loads R; `requestStop` sets R, then clears
//      P (`wake`). Both write this byte, so the order of the two read-modify-writes decides.
//   c. Busy against the stall monitor. The driving thread sets D or clears P, then loads the
//      monitor's `sleepWord`; the monitor stores `sleepWord`, then loads this byte
//      (``StallMonitor``, invariant 3).
// The relaxed loads are quick looks that are confirmed later or harmless when stale: R in the
// spin and in the launch paths of `Coroutine.async` and of pools.
//
// The mirror of the incoming queue. A closed ``WakeUpQueue`` is one value of its own head word,
// and stays there: a push and the close must be decided by one atomic operation on one word,
// so that a post is either among the leftovers `close` hands back or refused ("The race between
// a push and close" there); a second word could not be changed in the same operation. C mirrors
// it: `close` sets C first, then closes the queue, so a thread that sees the queue closed
// (acquire) also sees C. `isStopped` reads the queue's word, not C: a poster whose push was
// refused read that word, and anything that happens after the poster (it finishes the coroutine
// as stopped) reads the same word no older.

/// The state of a scheduler's lifecycle: a value of the byte described at the top of this file,
/// with the pure function that decides which transitions are legal.
struct SchedulerLifecycle: Hashable, Sendable, CustomStringConvertible {
    /// The bits (D, P, R, H, C at the top of this file).
    let rawValue: UInt8

    static let driven: UInt8 = 1 << 0
    static let parked: UInt8 = 1 << 1
    static let stopRequested: UInt8 = 1 << 2
    static let stopHandled: UInt8 = 1 << 3
    static let closed: UInt8 = 1 << 4
    /// Every bit that has a meaning; the others are always 0.
    static let allBits: UInt8 = driven | parked | stopRequested | stopHandled | closed

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A scheduler's state when it is created: `new`, nothing set.
    static let initial = SchedulerLifecycle(rawValue: 0)

    /// D: a thread drives the scheduler.
    @inline(__always) var isDriven: Bool { rawValue & Self.driven != 0 }
    /// P: the loop is parked in the poller (or about to be): a poster must wake it.
    @inline(__always) var isParked: Bool { rawValue & Self.parked != 0 }
    /// R: a stop was requested.
    @inline(__always) var isStopRequested: Bool { rawValue & Self.stopRequested != 0 }
    /// H: the loop acted on the stop request.
    @inline(__always) var isStopHandled: Bool { rawValue & Self.stopHandled != 0 }
    /// C: closed for good.
    @inline(__always) var isClosed: Bool { rawValue & Self.closed != 0 }
    /// R without H: a stop the loop has still to act on.
    @inline(__always) var isStopPending: Bool {
        rawValue & (Self.stopRequested | Self.stopHandled) == Self.stopRequested
    }
    /// D without P: busy, for the stall monitor.
    @inline(__always) var isBusy: Bool { rawValue & (Self.driven | Self.parked) == Self.driven }

    /// A change of the lifecycle (the transitions at the top of this file).
    enum Transition: CaseIterable, Sendable {
        case startDriving, park, unpark, wake, requestStop, handleStop, endDriving, endMainRun, close
    }

    /// Whether this state keeps invariants 1–3 at the top of this file on a scheduler of kind
    /// `kind` (and has no bit without a meaning): the states listed there, and only those.
    func isValid(for kind: CoroutineScheduler.Kind) -> Bool {
        rawValue & ~Self.allBits == 0
            && (!isParked || isDriven)
            && (!isStopHandled || isStopRequested)
            && (!isClosed || !isDriven && !isParked)
            && !(isClosed && kind == .main)
    }

    /// The state that `transition` leads to from `state`, on a scheduler of kind `kind`, or nil
    /// if it is not legal from there (the table at the top of this file), or if `state` is not
    /// one of the states listed there (``isValid(for:)``). A transition that changes nothing
    /// (`wake` without P, a stop requested twice) is legal and returns `state`. Pure; any thread.
    static func next(after transition: Transition, from state: SchedulerLifecycle,
                     kind: CoroutineScheduler.Kind) -> SchedulerLifecycle? {
        guard state.isValid(for: kind) else { return nil }
        let s = state.rawValue
        let isMain = kind == .main
        func has(_ bits: UInt8) -> Bool { s & bits == bits }
        func lacks(_ bits: UInt8) -> Bool { s & bits == 0 }
        let result: UInt8?
        switch transition {
        case .startDriving:
            result = lacks(driven | parked | stopHandled | closed) && (!isMain || lacks(stopRequested))
                ? s | driven : nil
        case .park:
            result = has(driven) && lacks(parked) ? s | parked : nil
        case .unpark:
            result = has(driven) ? s & ~parked : nil
        case .wake:
            result = s & ~parked
        case .requestStop:
            result = isMain && lacks(driven) ? s : s | stopRequested
        case .handleStop:
            result = has(driven | stopRequested) && lacks(parked | stopHandled) ? s | stopHandled : nil
        case .endDriving:
            result = has(driven) && lacks(parked) ? s & ~driven : nil
        case .endMainRun:
            result = isMain && lacks(driven) ? s & ~(stopRequested | stopHandled) : nil
        case .close:
            result = !isMain && lacks(driven | parked | closed) ? s | closed : nil
        }
        return result.map(SchedulerLifecycle.init(rawValue:))
    }

    /// The bits set, in the order of the states at the top of this file, e.g. `{D P R}`, `{C R}`.
    var description: String {
        let names: [(UInt8, String)] = [(Self.closed, "C"), (Self.driven, "D"), (Self.parked, "P"),
                                         (Self.stopRequested, "R"), (Self.stopHandled, "H")]
        let set = names.filter { rawValue & $0.0 != 0 }.map(\.1)
        let unknown = rawValue & ~Self.allBits
        return "{" + (set + (unknown != 0 ? ["0x\(String(unknown, radix: 16))"] : [])).joined(separator: " ") + "}"
    }
}

/// The atomic byte holding a scheduler's ``SchedulerLifecycle`` (see the top of this file for
/// who makes which transition, and the orderings).
struct AtomicSchedulerLifecycle: ~Copyable {
    private let word = Atomic<UInt8>(SchedulerLifecycle.initial.rawValue)

    init() {}

    /// The current state, sequentially consistent (the looks of the Dekker pairs at the top of
    /// this file). Any thread; one load.
    @inline(__always)
    func load() -> SchedulerLifecycle {
        SchedulerLifecycle(rawValue: word.load(ordering: .sequentiallyConsistent))
    }

    /// The current state, relaxed: a quick look, confirmed later or harmless when stale. Any
    /// thread; one load.
    @inline(__always)
    func loadRelaxed() -> SchedulerLifecycle {
        SchedulerLifecycle(rawValue: word.load(ordering: .relaxed))
    }

    /// Makes `transition` on a scheduler of kind `kind` with one sequentially consistent
    /// read-modify-write, and returns the state before and after it. In debug builds, stops the
    /// process if the transition is not legal from the state it found
    /// (``SchedulerLifecycle/next(after:from:kind:)``); release builds check nothing.
    /// The thread each transition is made by: see the top of this file.
    @inline(__always) @discardableResult
    func apply(_ transition: SchedulerLifecycle.Transition,
               kind: CoroutineScheduler.Kind) -> (old: SchedulerLifecycle, new: SchedulerLifecycle) {
        let old: UInt8
        let new: UInt8
        switch transition {
        case .startDriving: (old, new) = word.bitwiseOr(SchedulerLifecycle.driven, ordering: .sequentiallyConsistent)
        case .park: (old, new) = word.bitwiseOr(SchedulerLifecycle.parked, ordering: .sequentiallyConsistent)
        case .handleStop: (old, new) = word.bitwiseOr(SchedulerLifecycle.stopHandled, ordering: .sequentiallyConsistent)
        case .close: (old, new) = word.bitwiseOr(SchedulerLifecycle.closed, ordering: .sequentiallyConsistent)
        case .unpark, .wake: (old, new) = word.bitwiseAnd(~SchedulerLifecycle.parked, ordering: .sequentiallyConsistent)
        case .endDriving: (old, new) = word.bitwiseAnd(~SchedulerLifecycle.driven, ordering: .sequentiallyConsistent)
        case .endMainRun:
            (old, new) = word.bitwiseAnd(~(SchedulerLifecycle.stopRequested | SchedulerLifecycle.stopHandled),
                                         ordering: .sequentiallyConsistent)
        case .requestStop: (old, new) = requestStop(kind: kind)
        }
        assert(SchedulerLifecycle.next(after: transition, from: SchedulerLifecycle(rawValue: old), kind: kind)
                   == SchedulerLifecycle(rawValue: new),
               "internal inconsistency: illegal scheduler lifecycle transition \(transition) (\(kind)): "
               + "\(SchedulerLifecycle(rawValue: old)) → \(SchedulerLifecycle(rawValue: new))")
        return (SchedulerLifecycle(rawValue: old), SchedulerLifecycle(rawValue: new))
    }

    /// Sets R, unless the scheduler is main and not driven (invariant 5): the check and the change
    /// in one compare-and-swap.
    private func requestStop(kind: CoroutineScheduler.Kind) -> (UInt8, UInt8) {
        var old = word.load(ordering: .sequentiallyConsistent)
        while true {
            if kind == .main && old & SchedulerLifecycle.driven == 0 { return (old, old) }
            let new = old | SchedulerLifecycle.stopRequested
            let (exchanged, current) = word.compareExchange(expected: old, desired: new,
                                                            successOrdering: .sequentiallyConsistent,
                                                            failureOrdering: .sequentiallyConsistent)
            if exchanged { return (old, new) }
            old = current
        }
    }
}
