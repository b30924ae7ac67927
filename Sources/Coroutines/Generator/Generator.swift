import CCoroutines

/// A lazy sequence whose elements are produced by a body that runs on its own stack and hands
/// them out with `try yield(value)` — from any depth of ordinary synchronous calls.
///
/// ```swift
/// let naturals = Generator<Int> { yield in
///     var i = 0
///     while true { try yield(i); i += 1 }
/// }
/// for n in naturals.prefix(3) { print(n) }      // 0 1 2
///
/// // `yield` works inside callbacks of a synchronous API (a visitor, a parser delegate):
/// let leaves = Generator<String> { yield in
///     try tree.visit { node in try yield(node.name) }
/// }
/// ```
///
/// Each ``next()`` switches directly to the generator's stack, runs the body until its next
/// `yield` (or its end) and switches back: no scheduler, no thread hop, no allocation per
/// element. The body starts at the first `next()`; after it returns or throws, `next()` returns
/// `nil` forever and a thrown error is kept in ``error``.
///
/// ## Threading
/// A generator is confined to one thread and is not `Sendable`. Any code may drive it — inside or
/// outside a coroutine, on a scheduler thread or a plain thread — but once the body has started,
/// `next()`, ``cancel()`` and the final release must happen on the thread of the first `next()`:
/// `next()` on another thread traps with "generator resumed on a different thread" (a stack never
/// migrates between threads: <doc:ThreadsSchedulersAndCoroutines>); a release on another thread
/// leaks the stack and reports it on stderr (once per process).
///
/// ## Inside a coroutine
/// The body runs on behalf of whoever called `next()`. Called from a coroutine, the body sees
/// that coroutine as `Coroutine.current`, and a suspending call in the body (`Coroutine.delay`,
/// `promise.await()`) suspends that coroutine — with the body's frames kept on the generator's
/// stack — and resumes it there on the same scheduler thread; the consumer's `next()` simply
/// takes longer. Called from outside any coroutine, `Coroutine.current` is `nil` in the body and
/// suspending calls throw `CoroutineError.notInCoroutine`. Running inside `next()`, the body
/// shares its consumer's floating-point environment (rounding mode, flush-to-zero), as a function
/// shares its caller's (see <doc:Generators>).
///
/// ## Cancellation and release
/// ``cancel()``, or releasing a generator whose body is suspended, resumes the body with its
/// pending `yield` throwing `CancellationError`, so `defer` blocks run and the stack goes back to
/// the pool. Every later `yield` throws at once without switching, so a body inside a callback
/// that cannot throw simply runs on to its end; more than 1,000 such yields trap with "generator
/// body ignores cancellation" (see <doc:Generators>).
///
/// ## Design
/// The shape is coobjc's `COGenerator` (a coroutine resumed by `next`) and Python's generators
/// (lazy, single-pass, `close()` raises inside the body so `finally` runs); the stack is one of
/// the runtime's pooled guarded stacks (see <doc:Stacks>).
public final class Generator<Element>: Sequence, IteratorProtocol {
    /// The switching state, in manually allocated memory (see `GeneratorFrame`).
    @usableFromInline let frame: UnsafeMutablePointer<GeneratorFrame>
    /// Where `yield` leaves the element for `next()`. Initialized only from a `yield` that
    /// switches back to `next()` until that `next()` moves the element out, right after the
    /// switch: `next()` finds the phase `.suspended` exactly then (the body may also have ended,
    /// `.finished`, leaving nothing). Outside `next()` it is always uninitialized.
    @usableFromInline let slot: UnsafeMutablePointer<Element>
    /// The body until it starts.
    @exclusivity(unchecked) private var body: ((Yield<Element>) throws -> Void)?
    /// What the body threw.
    @exclusivity(unchecked) private var thrown: (any Error)?

    /// Creates a generator; the body does not run until the first ``next()``.
    ///
    /// - Parameters:
    ///   - stackSize: Bytes of stack for the body; `nil` means 256 KiB. Rounded up to a multiple
    ///     of 16 KiB; must be in `1...64 MiB` (otherwise a precondition failure). Only touched
    ///     pages cost memory. The stack is taken at the first `next()` and returned to the pool
    ///     when the body ends.
    ///   - body: Produces the elements by calling `try yield(value)`. It must let the
    ///     `CancellationError` thrown by `yield` propagate (or end soon after catching it).
    /// - Suspends: no. The generator is confined to one thread (see the type's Threading section).
    /// - Complexity: O(1); no stack is allocated yet.
    public init(stackSize: Int? = nil, _ body: @escaping (Yield<Element>) throws -> Void) {
        let size = StackAllocator.normalizedSize(stackSize)
        frame = .allocate(capacity: 1)
        frame.initialize(to: GeneratorFrame(stackSize: size, run: Self.runBody))
        slot = .allocate(capacity: 1)
        self.body = body
        frame.pointee.object = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        switch frame.pointee.machine.phase {
        case .suspended:
            if frame.pointee.owner == UInt(bitPattern: ccoro_thread_token()) {
                // Unwind: the pending yield throws CancellationError, defer blocks run, the stack
                // returns to the pool when the body ends.
                if frame.pointee.machine.cancel() == .unwind { generatorResume(frame) }
            } else {
                generatorReportForeignRelease()
            }
        case .created, .finished:
            break
        case .running:
            preconditionFailure("internal inconsistency: a running generator was released")
        }
        slot.deallocate()
        frame.deinitialize(count: 1)
        frame.deallocate()
    }

    /// Runs the body to its next `yield` and returns the yielded element.
    ///
    /// The first call starts the body; each call runs it until it yields once more. After the
    /// body has returned or thrown (or after ``cancel()``), returns `nil` — forever.
    ///
    /// - Returns: The next element, or `nil` when the body has ended. If it ended by throwing,
    ///   the error is in ``error``. If no stack could be allocated for the body, `nil` with
    ///   `CoroutineError.stackUnavailable` in ``error``.
    /// - Suspends: no — it switches to the generator's stack and back on the calling thread. If
    ///   the body makes a suspending call while running for a coroutine, that coroutine suspends
    ///   inside this call and resumes on its own scheduler thread.
    /// - Precondition: Not called from inside this generator's own body (traps with "generator
    ///   already running"), and, once started, called on the thread of the first call (traps with
    ///   "generator resumed on a different thread"). Both messages survive release builds.
    /// - Complexity: O(1) plus the body's work: two context switches per element.
    // Always inlined: a call around the switch would cost a mispredicted return per element
    // (the return predictor cannot follow a stack switch).
    @inlinable @inline(__always)
    public func next() -> Element? {
        let action = frame.pointee.machine.next()
        if _fastPath(action == .resume) {
            generatorResume(frame)
        } else if !runOtherwise(action) {
            return nil
        }
        // The body yielded (the slot holds the element) or ended.
        return frame.pointee.machine.phase == .suspended ? slot.move() : nil
    }

    /// `next()` for every action but `.resume`, out of line (see `GeneratorStateMachine.next()`).
    /// Returns whether the body ran (and so may have left an element in the slot).
    @usableFromInline @inline(never)
    func runOtherwise(_ action: GeneratorStateMachine.NextAction) -> Bool {
        switch action {
        case .resume:
            generatorResume(frame)
            return true
        case .returnNil:
            return false
        case .start:
            if generatorStart(frame) { return true }
            recordStartFailure()
            return false
        case .trapAlreadyRunning:
            fatalError("generator already running")
        }
    }

    /// What the body threw, once it has ended by throwing; `nil` while it runs, after a normal
    /// return, or if it never ran.
    ///
    /// After ``cancel()`` of a started body this is the `CancellationError` its `yield` threw
    /// (unless the body caught it).
    ///
    /// - Complexity: O(1). Same thread as ``next()``.
    public var error: (any Error)? { thrown }

    /// Ends the generator: a body that has not started never runs; a suspended body is resumed
    /// with its pending `yield` throwing `CancellationError`, so its `defer` blocks run, and its
    /// stack returns to the pool before `cancel()` returns. Called from inside the body, the next
    /// `yield` throws. Later ``next()`` calls return `nil`. Idempotent.
    ///
    /// - Suspends: no (it switches to the generator's stack and back on the calling thread).
    /// - Precondition: A started body is cancelled on the thread where it suspended (else traps
    ///   with "generator resumed on a different thread").
    /// - Complexity: O(1) plus the rest of the body's run.
    public func cancel() {
        switch frame.pointee.machine.cancel() {
        case .none:
            break
        case .discardBody:
            body = nil
        case .unwind:
            // A cancelled body's yields never store an element (see `slot`).
            generatorResume(frame)
        }
    }

    private func recordStartFailure() {
        body = nil
        thrown = CoroutineError.stackUnavailable
    }

    /// Runs the body on the generator's stack. Holds no strong reference to the generator while
    /// the body runs, so releasing the generator can unwind it.
    private static func runBody(_ object: UnsafeMutableRawPointer) {
        let g = Unmanaged<Generator<Element>>.fromOpaque(object)
        guard let body = g._withUnsafeGuaranteedRef({ $0.takeBody() }) else { return }
        let yield = Yield<Element>(frame: g._withUnsafeGuaranteedRef { $0.frame },
                                   slot: g._withUnsafeGuaranteedRef { $0.slot })
        var thrown: (any Error)?
        do { try body(yield) } catch { thrown = error }
        g._withUnsafeGuaranteedRef { $0.thrown = thrown }
    }

    private func takeBody() -> ((Yield<Element>) throws -> Void)? {
        defer { body = nil }
        return body
    }
}

@available(*, unavailable)
extension Generator: Sendable {}

/// The function a ``Generator``'s body calls to hand out an element: `try yield(value)`.
///
/// Valid only while its own body runs, at any depth of synchronous calls (including callbacks of
/// a synchronous API). Using it elsewhere while its generator is alive — after the body ended,
/// from the consumer, from another generator's body — traps with "yield used outside its
/// generator's body". Do not let it escape the body: after the generator is released, a call is
/// undefined behaviour (the check itself reads the generator's freed state).
///
/// Not `Sendable`: it belongs to the generator's thread.
public struct Yield<Element> {
    @usableFromInline let frame: UnsafeMutablePointer<GeneratorFrame>
    @usableFromInline let slot: UnsafeMutablePointer<Element>

    @usableFromInline
    init(frame: UnsafeMutablePointer<GeneratorFrame>, slot: UnsafeMutablePointer<Element>) {
        self.frame = frame
        self.slot = slot
    }

    /// Hands `value` to the consumer's pending ``Generator/next()`` and suspends the body until
    /// the next `next()`.
    ///
    /// - Parameter value: The element `next()` returns.
    /// - Throws: `CancellationError` when the generator is cancelled or released while the body
    ///   waits here, and at once (without switching) for every call after that. More than 1,000
    ///   calls after cancellation trap with "generator body ignores cancellation".
    /// - Suspends: the body only — control switches back to the consumer on the same thread;
    ///   the body resumes on that thread at the next `next()`. No scheduler is involved.
    /// - Complexity: O(1): one context switch out, one back in.
    // Transparent, so that the body's loop holds the switch itself and no return sits between
    // the two stacks (a `ret` after a stack switch is mispredicted): next() went from about 40 to
    // 21 ns on Intel Xeon. Not @inline(__always): with it, Swift 6.3.1's release build crashed (a
    // SIL verification failure in OwnershipModelEliminator) compiling a generator whose body
    // yields generators; transparent functions are inlined earlier, in mandatory inlining, and
    // the release build with the tests compiles (docs/Performance.md).
    @_transparent
    public func callAsFunction(_ value: Element) throws {
        guard generatorIsOnOwnStack(frame) else {
            fatalError("yield used outside its generator's body")
        }
        switch frame.pointee.machine.yield() {
        case .suspend:
            slot.initialize(to: value)
            try generatorSuspend(frame)
        case .throwCancellation:
            throw CancellationError()
        case .trapIgnoresCancellation:
            fatalError("generator body ignores cancellation")
        }
    }
}

@available(*, unavailable)
extension Yield: Sendable {}
