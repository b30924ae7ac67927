import Dispatch
import Synchronization

/// How many of the runtime's own resources are in use across every scheduler: coroutine stacks,
/// armed timers and live coroutines. For leak checks (the soak run, `Scripts/soak.sh`); not part
/// of the public API.
///
/// Compare two snapshots taken while nothing runs: after every coroutine of interest has been
/// joined, with ``blockingSettled(_:)``, which first lets each scheduler they ran on go once
/// round its loop, so that the finished coroutines have been reaped (a joiner is woken as the
/// body ends, before its coroutine has switched out and given back its stack).
///
/// ```swift
/// @_spi(Diagnostics) import Coroutines
/// let before = RuntimeResources.blockingSettled(pool.schedulers)
/// // … run coroutines on the pool and join them all …
/// let after = RuntimeResources.blockingSettled(pool.schedulers)
/// precondition(after == before, "leaked: \(after), before: \(before)")
/// ```
///
/// ## Threading
/// ``current`` may be read from any thread, inside or outside a coroutine; it never blocks on a
/// scheduler. Each scheduler publishes its own counts with plain atomic stores (no
/// read-modify-write on its hot paths), so while schedulers run, a snapshot is a recent value
/// per scheduler, not one instant across all of them.
@_spi(Diagnostics)
public struct RuntimeResources: Sendable, Equatable, CustomStringConvertible {
    /// Coroutine stacks handed out and not given back: those of coroutines (and generators) that
    /// have started and not been reaped, not the stacks idle in a pool or a scheduler's cache.
    public var stacksInUse: Int
    /// Timers armed in the schedulers' timer heaps (`delay`, `withTimeout`, `select` timeouts,
    /// `cancel(after:)`, `Promise.timeout`); a timer that fired or was released is not counted.
    public var armedTimers: Int
    /// Coroutines admitted to a scheduler and not yet finished, not counting `Coroutine.async`
    /// launches whose coroutine object has not been created yet.
    public var liveCoroutines: Int

    /// The counts now, summed over every scheduler that can still run coroutines.
    ///
    /// - Suspends: no. Thread-safe; takes each scheduler's registry lock and the stack
    ///   allocator's lock briefly. While schedulers start and finish coroutines, the stack count
    ///   is read again until the schedulers' caches read the same before and after it (the
    ///   internal `StackAllocator.stacksInUse`), so it is a recent figure, never negative.
    /// - Complexity: O(schedulers).
    public static var current: RuntimeResources {
        let schedulers = SchedulerDirectory.shared.all
        return RuntimeResources(
            stacksInUse: StackAllocator.shared.stacksInUse,
            armedTimers: schedulers.reduce(0) { $0 + $1.armedTimerCount.load(ordering: .relaxed) },
            liveCoroutines: schedulers.reduce(0) { $0 + $1.liveCount })
    }

    /// Waits until each of `schedulers` has run its loop once, then returns ``current``.
    ///
    /// A job is posted to each scheduler and the calling thread blocks until all have run. Each
    /// runs on its scheduler's loop after what that scheduler had to do when the job was posted:
    /// a coroutine that had finished its body has been reaped (its stack given back), and a timer
    /// release posted from another thread has been done. A stopped scheduler's job runs on a
    /// default pool scheduler instead (a stopped scheduler has no coroutines or timers left).
    ///
    /// - Parameter schedulers: The schedulers to settle, e.g. `pool.schedulers`.
    /// - Returns: The counts after settling.
    /// - Precondition: the calling thread drives no scheduler (it would wait for itself); not in
    ///   a coroutine.
    /// - Suspends: no — it blocks the calling plain thread. Thread-safe.
    /// - Complexity: O(schedulers), one posted job and one wake-up per scheduler.
    @available(*, noasync, message: "blockingSettled blocks the thread")
    public static func blockingSettled(_ schedulers: [CoroutineScheduler]) -> RuntimeResources {
        precondition(CoroutineScheduler.current == nil,
                     "RuntimeResources.blockingSettled must be called from a thread that drives no scheduler")
        let ran = DispatchSemaphore(value: 0)
        for s in schedulers { s.execute { ran.signal() } }
        for _ in schedulers { ran.wait() }
        return current
    }

    /// `stacks N, timers N, coroutines N`.
    public var description: String {
        "stacks \(stacksInUse), timers \(armedTimers), coroutines \(liveCoroutines)"
    }
}
