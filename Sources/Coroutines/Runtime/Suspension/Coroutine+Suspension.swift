import CCoroutines
import Synchronization

/// A claim on one suspension of one coroutine (the role of Go's `sudog`).
///
/// Exactly one holder of a ticket for an armed suspension succeeds in `resume`: the coroutine's
/// `epoch` moves from the ticket's odd value to the next even one by compare-and-swap. Completion,
/// cancellation and timeouts all race through this single claim (see <doc:Cancellation>).
@usableFromInline
struct WaitTicket: Sendable {
    @usableFromInline let coroutine: Coroutine
    @usableFromInline let epoch: UInt64

    @inlinable
    init(coroutine: Coroutine, epoch: UInt64) {
        self.coroutine = coroutine
        self.epoch = epoch
    }

    /// Claims the suspension and makes the coroutine ready on its own scheduler.
    /// - Returns: false if someone else already claimed it.
    /// - Threading: any thread. The coroutine runs after the caller's coroutine suspends (same
    ///   scheduler) or asynchronously (other thread); never inside this call.
    @usableFromInline @discardableResult
    func resume(_ reason: WakeReason = .completed) -> Bool {
        coroutine.claim(epoch: epoch, reason: reason)
    }

    /// Claims the suspension without waking the coroutine yet: a channel claims a waiter under
    /// its lock, moves the value, and calls ``wakeClaimed()`` after unlocking.
    /// - Returns: false if someone else already claimed it (a stale waiter: skip it).
    @inlinable @inline(__always)
    func tryClaim() -> Bool {
        coroutine.tryClaim(epoch: epoch)
    }

    /// Makes a coroutine whose suspension this ticket claimed (``tryClaim()``) ready, as a
    /// normal completion. Any thread; call it without holding locks.
    @inlinable
    consuming func wakeClaimed() {
        coroutine.wakeClaimed(.completed)
    }

    @inlinable
    func matches(_ other: WaitTicket) -> Bool {
        coroutine === other.coroutine && epoch == other.epoch
    }

    /// Whether this suspension was claimed already (or a later one armed): a waker would skip
    /// it. Once true, true for ever. A peek, for dropping withdrawn waiters; never a claim.
    @inlinable
    var isStale: Bool { coroutine.epoch.load(ordering: .relaxed) != epoch }
}

/// A coroutine whose suspension a waker has claimed (``Coroutine/tryClaim(epoch:)``) and must
/// now make ready: the unretained counterpart of a claimed ``WaitTicket``, for channel hand-offs.
///
/// No reference is needed: a claimed coroutine cannot run, so it cannot finish, until it is
/// made ready, and until it finishes its scheduler's registry keeps it alive.
@usableFromInline
struct ClaimedCoroutine {
    @usableFromInline let coroutine: Unmanaged<Coroutine>

    @inlinable
    init(_ coroutine: Unmanaged<Coroutine>) {
        self.coroutine = coroutine
    }

    /// Makes the coroutine ready as a normal completion. Any thread; call it without locks.
    @inlinable
    func wake() {
        coroutine._withUnsafeGuaranteedRef { $0.wakeClaimed(.completed) }
    }
}

/// A `withTimeout` scope of one coroutine. Confined to the coroutine's scheduler thread.
final class TimeoutScope {
    var expired = false
    /// A suspending operation threw `CoroutineError.timedOut` because of this scope. Code that
    /// swallows that error (a `for x in channel` loop ends on it) cannot make `withTimeout`
    /// look as if the body had finished in time: `withTimeout` throws when this is set.
    var delivered = false
    var timer: TimerNode?
}

extension Coroutine {
    /// The coroutine running on the current thread, or nil.
    ///
    /// - Complexity: O(1) (a thread-local read). Thread-safe.
    public static var current: Coroutine? {
        guard let p = ccoro_tls_coroutine() else { return nil }
        return Unmanaged<Coroutine>.fromOpaque(p).takeUnretainedValue()
    }

    /// Whether the current code runs inside a coroutine that has not been cancelled.
    /// - Complexity: O(1). Thread-safe.
    public static var isActive: Bool {
        guard let c = current else { return false }
        return !c.isCancelled
    }

    /// Throws `CancellationError` if the current coroutine was cancelled; does nothing outside a
    /// coroutine. Does not suspend.
    /// - Throws: `CancellationError`.
    /// - Complexity: O(1).
    public static func checkCancellation() throws {
        if let c = current, c.isCancelled { throw CancellationError() }
    }

    /// Runs `body` with the running coroutine, or throws `CoroutineError.notInCoroutine`
    /// (`forkedProcess` in a forked child).
    ///
    /// It takes no reference: the running coroutine is kept alive by its scheduler's registry
    /// until the loop reaps it, after its body ended, so it outlives anything its own code
    /// calls. Only for code running on that coroutine.
    @inlinable @inline(__always)
    static func withCurrent<R>(_ body: (Coroutine) throws -> R) throws -> R {
        guard let p = ccoro_tls_coroutine() else { throw CoroutineError.outsideCoroutine }
        // Every suspending entry point comes through here: on a slab stack (no guard page) an
        // overflow is reported before the runtime's own frames go deeper (<doc:Stacks>).
        ccoro_check_stack_bound()
        return try Unmanaged<Coroutine>.fromOpaque(p)._withUnsafeGuaranteedRef(body)
    }

    /// Throws if a suspending operation must not proceed: cancelled, or a timeout scope expired.
    /// Two loads from the object's first cache line on the fast path.
    @inlinable @inline(__always)
    func checkInterrupts() throws {
        if _slowPath(hasPendingInterrupt) { try throwInterrupt() }
    }

    /// Throws the pending interrupt: `CoroutineError.forkedProcess` in a forked child (whose
    /// fork handler marked the forking coroutine cancelled to bring it here: ``ForkGuard``), else
    /// `CancellationError`, else the expired timeout.
    @usableFromInline
    func throwInterrupt() throws {
        if ForkGuard.isForkedChild { throw CoroutineError.forkedProcess }
        if cancelledFlag.load(ordering: .sequentiallyConsistent) { throw CancellationError() }
        if expiredTimeoutScopes > 0 { throw timedOutError() }
    }

    /// `CoroutineError.timedOut`, recorded on the expired scopes as delivered.
    func timedOutError() -> CoroutineError {
        for scope in timeoutScopes where scope.expired { scope.delivered = true }
        return .timedOut
    }

    /// Whether cancellation or an expired `withTimeout` scope forbids suspending now.
    @inlinable @inline(__always)
    var hasPendingInterrupt: Bool {
        cancelledFlag.load(ordering: .sequentiallyConsistent) || expiredTimeoutScopes > 0
    }

    /// Takes the suspension armed at epoch `e`: moves the odd epoch to the next even value
    /// (compare-and-swap), so exactly one of completion, cancellation, timeout and the
    /// coroutine's own disarm wins. Any thread.
    /// - Returns: false if someone else took it first (or `e` is not the armed epoch).
    @inlinable @inline(__always)
    func tryClaim(epoch e: UInt64) -> Bool {
        epoch.compareExchange(expected: e, desired: e &+ 1, ordering: .sequentiallyConsistent).exchanged
    }

    /// Claims the suspension armed at `epoch` (see ``WaitTicket``) and wakes it. Any thread.
    func claim(epoch e: UInt64, reason: WakeReason) -> Bool {
        guard tryClaim(epoch: e) else { return false }
        wakeClaimed(reason)
        return true
    }

    /// Makes the coroutine ready after its suspension was claimed. Any thread. It needs no
    /// reference of the caller's: a claimed coroutine cannot run, so cannot finish, until this
    /// makes it ready (``CoroutineScheduler/makeReady(_:)`` takes one where it must).
    @usableFromInline
    func wakeClaimed(_ reason: WakeReason) {
        wakeReason = reason
        // The scheduler is borrowed: this coroutine holds it.
        placement._withUnsafeGuaranteedRef { $0.makeReady(self) }
    }

    /// ``wakeClaimed(_:)`` as a normal completion, to run next on its scheduler when called on that
    /// scheduler's thread (``CoroutineScheduler/makeReadyNext(_:)``). Any thread.
    @usableFromInline
    func wakeClaimedNext() {
        wakeReason = .completed
        placement._withUnsafeGuaranteedRef { $0.makeReadyNext(self) }
    }

    /// Claims the current suspension, if one is armed (cancellation, timeouts).
    func interruptWait(_ reason: WakeReason) {
        let e = epoch.load(ordering: .sequentiallyConsistent)
        if e & 1 == 1 { _ = claim(epoch: e, reason: reason) }
    }

    /// Suspends the running coroutine until a holder of its ticket resumes it.
    ///
    /// The protocol: check interrupts; arm (epoch becomes odd); `register` publishes the ticket and
    /// returns true if the operation already completed (then the coroutine disarms and returns at
    /// once); re-check interrupts after arming (so a cancel racing with the arm is never lost);
    /// switch away. After resumption a `.completed` wake returns normally — even if the coroutine
    /// was cancelled meanwhile (<doc:Cancellation>) — and any other wake calls `unregister` and
    /// throws.
    ///
    /// Must be called by the coroutine itself, on its scheduler's thread.
    @usableFromInline
    func wait(_ kind: WaitKind, register: (WaitTicket) throws -> Bool, unregister: (WaitTicket) -> Void) throws {
        try waitCore(kind, register: { try register(WaitTicket(coroutine: self, epoch: $0)) },
                     unregister: { unregister(WaitTicket(coroutine: self, epoch: $0)) })
    }

    /// ``wait(_:register:unregister:)`` for a caller that needs only the armed epoch, not a
    /// ``WaitTicket`` (whose reference to the coroutine costs a retain and a release): `register`
    /// and `unregister` receive the epoch. Same protocol and threading.
    @usableFromInline
    func wait(_ kind: WaitKind, registerEpoch register: (UInt64) throws -> Bool,
              unregister: (UInt64) -> Void) throws {
        try waitCore(kind, register: register, unregister: unregister)
    }

    @inline(__always)
    private func waitCore(_ kind: WaitKind, register: (UInt64) throws -> Bool, unregister: (UInt64) -> Void) throws {
        try checkInterrupts()
        let armed = armEpoch()
        let done: Bool
        do {
            done = try register(armed)
        } catch {
            // Nothing was published; a canceller may still have claimed the armed epoch.
            if !disarm(armed) { suspendForWake(kind) }
            throw error
        }
        if done {
            if disarm(armed) { return }
            // A canceller or timeout claimed it concurrently and queued a wake: consume it.
            suspendForWake(kind)
            return
        }
        try suspend(armedEpoch: armed, kind, unregister: { unregister($0.epoch) })
    }

    /// Arms a suspension: the epoch becomes odd, and the caller may publish a waiter for it.
    ///
    /// The split form of ``wait(_:register:unregister:)`` for callers that publish the waiter
    /// inside their own critical section (channels, `select`): call ``checkInterrupts()`` first,
    /// then `armEpoch()`, publish, and call ``suspend(armedEpoch:_:unregister:)`` after releasing
    /// the lock. Must be called by the coroutine itself, on its scheduler's thread.
    @inlinable @inline(__always)
    func armEpoch() -> UInt64 {
        epoch.add(1, ordering: .sequentiallyConsistent).newValue
    }

    /// Suspends after a waiter for the epoch `armed` (from ``armEpoch()``) was published, until
    /// a holder resumes it.
    ///
    /// Re-checks interrupts first, so a cancellation racing with the publication is never lost.
    /// Returns normally on a `.completed` wake (even if cancelled meanwhile: <doc:Cancellation>);
    /// otherwise calls `unregister` and throws `CancellationError` or `CoroutineError.timedOut`.
    @usableFromInline
    func suspend(armedEpoch armed: UInt64, _ kind: WaitKind, unregister: (WaitTicket) -> Void) throws {
        if hasPendingInterrupt {
            if disarm(armed) {
                unregister(WaitTicket(coroutine: self, epoch: armed))
                try checkInterrupts()
                throw CancellationError()  // unreachable: one of the interrupts above holds
            }
        }
        suspendForWake(kind)
        switch wakeReason {
        case .completed:
            return
        case .cancelled:
            unregister(WaitTicket(coroutine: self, epoch: armed))
            throw CancellationError()
        case .timedOut:
            unregister(WaitTicket(coroutine: self, epoch: armed))
            throw timedOutError()
        }
    }

    /// Suspends the running coroutine, an actor parking in its mailbox, *without arming a wait*:
    /// owned by its scheduler's thread (``CoroutineScheduler/actorOwnedByThread``, `Mailbox`
    /// invariant 12). A coroutine of that thread may resume it directly, with no claim; else
    /// the loop arms the wait when it gets the thread back, and a claimer resumes it then. The
    /// caller has checked that the slot is free. Returns on a `.completed` wake; throws
    /// `CancellationError` or `CoroutineError.timedOut` for an interrupt (which can reach it only
    /// once the loop armed it). Must be called by the coroutine itself, on its scheduler's thread.
    @usableFromInline
    func waitOwnedByThread(_ kind: WaitKind) throws {
        placement._withUnsafeGuaranteedRef { $0.actorOwnedByThread = Unmanaged.passUnretained(self) }
        suspendForWake(kind)
        switch wakeReason {
        case .completed: return
        case .cancelled: throw CancellationError()
        case .timedOut: throw timedOutError()
        }
    }

    /// Takes back an armed suspension nobody claimed yet. Returns false if it was claimed.
    private func disarm(_ armed: UInt64) -> Bool {
        tryClaim(epoch: armed)
    }

    private func suspendForWake(_ kind: WaitKind) {
        waitKindValue.store(kind.rawValue, ordering: .relaxed)
        status = .suspended
        placement._withUnsafeGuaranteedRef { $0.switchAway(from: self) }
        waitKindValue.store(WaitKind.none.rawValue, ordering: .relaxed)
    }
}
