import Synchronization
/// Errors thrown by coroutine operations when they are misused or cannot proceed.
///
/// Cancellation is reported with the standard `CancellationError`, not with this type.
public enum CoroutineError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A suspending operation was called outside a coroutine (in a forked child:
    /// ``forkedProcess`` instead). Call it from a body passed to
    /// `Coroutine.launch`, `Coroutine.async` or `Coroutine.runBlocking`.
    case notInCoroutine
    /// `runBlocking` was called inside a coroutine or on a thread that already drives a scheduler.
    case nestedRunBlocking
    /// `runBlocking` was called on a thread of Swift concurrency's cooperative pool; use
    /// `try await Coroutine.run { … }` there.
    case blockingCooperativeThread
    /// The coroutine was launched onto a scheduler that had been stopped; its body never ran. Also
    /// the rejection of a `Promise.timeout` whose timer was armed onto a stopped scheduler.
    case schedulerStopped
    /// `Coroutine.withTimeout` ran out of time.
    case timedOut
    /// A coroutine tried to join itself, which would never return.
    case joinSelf
    /// A coroutine called `CoroutineMutex.lock()` while it already held that mutex
    /// (`CoroutineMutex` is not recursive; locking again would wait forever).
    case recursiveLock
    /// No stack could be mapped for the coroutine; its body never ran.
    case stackUnavailable
    /// The poller refused the descriptor passed to `waitUntilReadable`/`waitUntilWritable`
    /// (for example `EBADF`: it is not open).
    case pollFailed(errno: Int32)
    /// The call was made in a child process created by `fork()` after the runtime had started:
    /// the runtime's threads (schedulers, pools, the stall monitor) do not exist in the child,
    /// and its pollers belong to the parent.
    ///
    /// In such a child every launch finishes at once with this error without running its body
    /// (the promise of `Coroutine.async` is rejected with it, `join` and `error` report it);
    /// `Coroutine.runBlocking`, `Coroutine.run` and every suspending call throw it. A child of
    /// `fork()` should call only async-signal-safe functions and then `exec` or `_exit`; to run
    /// coroutines, start a new process (`posix_spawn`, Foundation's `Process`, which are not
    /// affected). See <doc:BlockingAndStopping>.
    case forkedProcess

    /// What happened and what to do about it.
    public var description: String {
        switch self {
        case .notInCoroutine: "a suspending call was made outside a coroutine; call it from a body passed to Coroutine.launch, Coroutine.async or Coroutine.runBlocking"
        case .nestedRunBlocking: "runBlocking was called inside a coroutine or on a thread already driving a scheduler; launch a coroutine or join instead"
        case .blockingCooperativeThread: "runBlocking would block a Swift concurrency thread; use `try await Coroutine.run { … }` in async code"
        case .schedulerStopped: "the scheduler was stopped before the coroutine could run (or the timer could be armed)"
        case .timedOut: "the operation timed out"
        case .joinSelf: "a coroutine cannot join itself"
        case .recursiveLock: "the coroutine already holds this CoroutineMutex, which is not recursive; unlock it first"
        case .stackUnavailable: "no stack could be allocated for the coroutine"
        case .pollFailed(let e): "the descriptor cannot be polled (errno \(e))"
        case .forkedProcess: "the runtime's threads do not exist in a forked child; exec, or start a new process"
        }
    }
}

extension CoroutineError {
    /// The error of a suspending call made outside a coroutine: ``notInCoroutine``, or
    /// ``forkedProcess`` in a forked child (where no call could suspend anyway). For this
    /// package's modules (CoroutinesFoundation's suspending calls).
    @usableFromInline
    package static var outsideCoroutine: CoroutineError { ForkGuard.isForkedChild ? .forkedProcess : .notInCoroutine }
}

/// Errors with which a ``Promise`` can be rejected by the library itself.
public enum PromiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `Promise.timeout(_:)` elapsed before the promise settled.
    case timedOut
    /// `Promise.race([])` has nothing to race.
    case empty

    /// What happened.
    public var description: String {
        switch self {
        case .timedOut: "the promise did not settle in time"
        case .empty: "race of an empty list of promises"
        }
    }
}
