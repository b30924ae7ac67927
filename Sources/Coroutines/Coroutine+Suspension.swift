import CCoroutines
import Synchronization

/// A claim on one suspension of one coroutine (the role of Go's `sudog`).
///
/// Exactly one holder of a ticket for an armed suspension succeeds in `resume`: the coroutine's
/// `epoch` moves from the ticket's odd value to the next even one by compare-and-swap. Completion,
/// cancellation and timeouts all race through this single claim (SPEC §4.4).
@usableFromInline
struct WaitTicket: Sendable {
    @usableFromInline let coroutine: Coroutine
    @usableFromInline let epoch: UInt64

    /// Claims the suspension and makes the coroutine ready on its own scheduler.
    /// - Returns: false if someone else already claimed it.
    /// - Threading: any thread. The coroutine runs after the caller's coroutine suspends (same
    ///   scheduler) or asynchronously (other thread); never inside this call.
    @usableFromInline @discardableResult
    func resume(_ reason: WakeReason = .completed) -> Bool {
        coroutine.claim(epoch: epoch, reason: reason)
    }

    @usableFromInline
    func matches(_ other: WaitTicket) -> Bool {
        coroutine === other.coroutine && epoch == other.epoch
    }
}

/// A `withTimeout` scope of one coroutine. Confined to the coroutine's scheduler thread.
final class TimeoutScope {
    var expired = false
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

    /// The running coroutine, or `CoroutineError.notInCoroutine`.
    @usableFromInline
    static func requireCurrent() throws -> Coroutine {
        guard let c = current else { throw CoroutineError.notInCoroutine }
        return c
    }

    /// Throws if a suspending operation must not proceed: cancelled, or a timeout scope expired.
    @inline(__always)
    func checkInterrupts() throws {
        if cancelledFlag.load(ordering: .sequentiallyConsistent) { throw CancellationError() }
        if hasExpiredTimeout { throw CoroutineError.timedOut }
    }

    /// Whether cancellation or an expired `withTimeout` scope forbids suspending now.
    @inline(__always)
    var hasPendingInterrupt: Bool {
        cancelledFlag.load(ordering: .sequentiallyConsistent) || hasExpiredTimeout
    }

    private var hasExpiredTimeout: Bool {
        !timeoutScopes.isEmpty && timeoutScopes.contains { $0.expired }
    }

    /// Claims the suspension armed at `epoch` (see ``WaitTicket``). Any thread.
    func claim(epoch e: UInt64, reason: WakeReason) -> Bool {
        guard epoch.compareExchange(expected: e, desired: e &+ 1, ordering: .sequentiallyConsistent).exchanged else {
            return false
        }
        wakeReason = reason
        scheduler.makeReady(self)
        return true
    }

    /// Claims the current suspension, if one is armed (cancellation, timeouts).
    func interruptWait(_ reason: WakeReason) {
        let e = epoch.load(ordering: .sequentiallyConsistent)
        if e & 1 == 1 { _ = claim(epoch: e, reason: reason) }
    }

    /// Suspends the running coroutine until a holder of its ticket resumes it.
    ///
    /// The protocol: check interrupts; arm (epoch becomes odd); `register` publishes the ticket
    /// and returns true if the operation already completed (then the coroutine disarms and
    /// returns at once); re-check interrupts after arming (so a cancel racing with the arm is
    /// never lost); switch away. After resumption a `.completed` wake returns normally — even if
    /// the coroutine was cancelled meanwhile (§4.4) — and any other wake calls `unregister` and
    /// throws.
    ///
    /// Must be called by the coroutine itself, on its scheduler's thread.
    @usableFromInline
    func wait(_ kind: WaitKind, register: (WaitTicket) throws -> Bool, unregister: (WaitTicket) -> Void) throws {
        try checkInterrupts()
        let armed = epoch.add(1, ordering: .sequentiallyConsistent).newValue
        let ticket = WaitTicket(coroutine: self, epoch: armed)
        let done: Bool
        do {
            done = try register(ticket)
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
        if hasPendingInterrupt {
            if disarm(armed) {
                unregister(ticket)
                try checkInterrupts()
                throw CancellationError()  // unreachable: one of the interrupts above holds
            }
        }
        suspendForWake(kind)
        switch wakeReason {
        case .completed:
            return
        case .cancelled:
            unregister(ticket)
            throw CancellationError()
        case .timedOut:
            unregister(ticket)
            throw CoroutineError.timedOut
        }
    }

    /// Takes back an armed suspension nobody claimed yet. Returns false if it was claimed.
    private func disarm(_ armed: UInt64) -> Bool {
        epoch.compareExchange(expected: armed, desired: armed &+ 1, ordering: .sequentiallyConsistent).exchanged
    }

    private func suspendForWake(_ kind: WaitKind) {
        waitKindValue.store(kind.rawValue, ordering: .relaxed)
        status = .suspended
        scheduler.switchAway(from: self)
        waitKindValue.store(WaitKind.none.rawValue, ordering: .relaxed)
    }
}
