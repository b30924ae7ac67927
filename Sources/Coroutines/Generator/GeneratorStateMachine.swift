/// The life of one generator as a pure, synchronous state machine (no switching, no locks).
///
/// One `mutating func` per event; each returns what the caller must do. Confined to the
/// generator's thread (see <doc:Generators>), so it needs no synchronisation.
///
/// Invariants:
/// * `phase == .running` exactly while control is on the generator's stack (or the body's
///   coroutine is suspended there); `next()` is refused then ("generator already running").
/// * `cancelled` never goes back to false. Once it is set, a `yield` never switches: it throws at
///   once, and more than ``ignoredCancellationLimit`` such yields trap.
/// * `.finished` is final.
@usableFromInline
struct GeneratorStateMachine {
    @usableFromInline
    enum Phase: UInt8 {
        /// Created; the body has not started (nothing runs before the first `next()`:
        /// <doc:Generators>).
        case created
        /// The body waits in a `yield` on its own stack.
        case suspended
        /// Control is on the generator's stack.
        case running
        /// The body returned or threw (or never ran after a cancel); `next()` returns nil forever.
        case finished
    }

    /// What `next()` must do.
    @usableFromInline
    enum NextAction {
        case start, resume, returnNil, trapAlreadyRunning
    }

    /// What `yield` must do.
    @usableFromInline
    enum YieldAction {
        case suspend, throwCancellation, trapIgnoresCancellation
    }

    /// What `cancel()` must do.
    @usableFromInline
    enum CancelAction {
        /// Nothing to switch to: not started (the body is dropped), finished, or cancelled from
        /// inside the running body (its next `yield` throws).
        case none
        /// The body is dropped without ever running.
        case discardBody
        /// Resume the suspended body so that its pending `yield` throws `CancellationError`.
        case unwind
    }

    /// More yields than this after cancellation trap with "generator body ignores cancellation"
    /// (<doc:Generators>).
    @usableFromInline static let ignoredCancellationLimit = 1_000

    @usableFromInline var phase = Phase.created
    @usableFromInline var cancelled = false
    @usableFromInline var yieldsAfterCancellation = 0

    @inlinable init() {}

    /// The consumer calls `next()`. The common case (a suspended body) is one compare inlined
    /// into the caller; the others are out of line (`nextOtherwise()`), so that `next()` holds no
    /// jump table and keeps its registers for the switch (docs/Performance.md).
    @inlinable
    mutating func next() -> NextAction {
        if _fastPath(phase == .suspended) {
            phase = .running
            return .resume
        }
        return nextOtherwise()
    }

    /// `next()` when the body is not suspended.
    @usableFromInline
    mutating func nextOtherwise() -> NextAction {
        switch phase {
        case .suspended:
            phase = .running
            return .resume
        case .finished:
            return .returnNil
        case .created:
            phase = .running
            return .start
        case .running:
            return .trapAlreadyRunning
        }
    }

    /// The body calls `yield`. Only legal while running (the caller checks that first).
    @inlinable
    mutating func yield() -> YieldAction {
        assert(phase == .running, "internal inconsistency: yield while \(phase)")
        if cancelled {
            yieldsAfterCancellation += 1
            return yieldsAfterCancellation > Self.ignoredCancellationLimit ? .trapIgnoresCancellation : .throwCancellation
        }
        phase = .suspended
        return .suspend
    }

    @usableFromInline
    mutating func cancel() -> CancelAction {
        switch phase {
        case .created:
            cancelled = true
            phase = .finished
            return .discardBody
        case .suspended:
            cancelled = true
            phase = .running
            return .unwind
        case .running:
            cancelled = true
            return .none
        case .finished:
            return .none
        }
    }

    /// The body returned or threw.
    @usableFromInline
    mutating func finish() {
        guard phase == .running else { preconditionFailure("internal inconsistency: body finished while \(phase)") }
        phase = .finished
    }

    /// No stack could be taken for the first run.
    @usableFromInline
    mutating func failToStart() {
        guard phase == .running else { preconditionFailure("internal inconsistency: start failed while \(phase)") }
        phase = .finished
    }
}
