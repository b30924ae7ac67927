import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything the switch between a generator's consumer and its body needs, in manually
/// allocated memory: `ccoro_switch` only ever receives addresses inside this struct or inside a
/// `ccoro_stack_record`, never the address of a class property.
///
/// Confined to the generator's thread. Non-generic, so the switching code is compiled once.
@usableFromInline
struct GeneratorFrame {
    /// The saved registers of whichever side is switched out: the body's while the consumer runs,
    /// the consumer's while the body runs (`swapContext`). The consumer is whoever called
    /// `next()`, `cancel()` or released the generator last. First in the frame, and not in the
    /// stack record, so that both sides switch with the frame's own address, kept in a register:
    /// a load between the registers a switch restores and the address the next switch reads
    /// lengthens the chain of dependent loads every element waits for (docs/Performance.md).
    @usableFromInline var context = ccoro_context()
    /// The life cycle (pure state).
    @usableFromInline var machine = GeneratorStateMachine()
    /// The generator's stack while the body has one (taken at the first `next()`).
    @usableFromInline var stack: UnsafeMutablePointer<ccoro_stack_record>?
    /// The thread of the first `next()` (`ccoro_thread_token`, as an integer: 0 before the
    /// first `next()`); compared, never dereferenced.
    @usableFromInline var owner: UInt = 0
    /// The usable bounds of `stack` (0 while there is none), for the cheap "is this yield on its
    /// own body's stack" check.
    @usableFromInline var stackLow: UInt = 0
    @usableFromInline var stackHigh: UInt = 0
    /// The word each `yield` checks for an overflow of a slab stack: its canary, or, for a
    /// guarded stack (or none), a constant holding the canary's value, so that the check is one
    /// compare with no test for "no canary".
    @usableFromInline var canary: UnsafePointer<UInt64> = intactCanary
    /// Requested stack size (normalised).
    var stackSize: Int
    /// Runs the body: a static function of the concrete `Generator<Element>`, called with `object`.
    var run: (UnsafeMutableRawPointer) -> Void
    /// The generator object, unretained (the frame lives exactly as long as it).
    var object: UnsafeMutableRawPointer?

    // The consumer's stack, as the sanitizers know it.
    @usableFromInline var consumerFiber: UnsafeMutableRawPointer?
    @usableFromInline var consumerFakeStack: UnsafeMutableRawPointer?
    @usableFromInline var consumerBottom: UnsafeRawPointer?
    @usableFromInline var consumerSize = 0
    /// The overflow reporter's record before the body was entered.
    @usableFromInline var previousRunning: UnsafePointer<ccoro_running>?

    // When the consumer is a coroutine, the body runs on its behalf: while control is on the
    // generator's stack, the coroutine's record describes the generator's stack (so that a
    // suspension inside the body resumes there with the right guard region, canary and sanitizer
    // fiber). Its own values wait here.
    @usableFromInline var hostRecord: UnsafeMutablePointer<ccoro_stack_record>?
    var hostStack = ccoro_stack()
    var hostRunning = ccoro_running()
    var hostFiber: UnsafeMutableRawPointer?

    init(stackSize: Int, run: @escaping (UnsafeMutableRawPointer) -> Void) {
        self.stackSize = stackSize
        self.run = run
    }
}

/// What `GeneratorFrame.canary` points at when the stack has no canary (a guarded stack).
@usableFromInline
nonisolated(unsafe) let intactCanary: UnsafePointer<UInt64> = {
    let word = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
    word.initialize(to: CCORO_CANARY_VALUE)
    return UnsafePointer(word)
}()

/// NUL-terminated name the overflow reporter prints for a generator stack.
nonisolated(unsafe) private let generatorStackName: UnsafeMutablePointer<CChar> = strdup("generator")!

/// Starts the body at the first `next()`: takes a stack, lays out its first frame and switches to
/// it. Returns false (the generator is finished) if no stack could be allocated.
@usableFromInline
func generatorStart(_ f: UnsafeMutablePointer<GeneratorFrame>) -> Bool {
    ccoro_signal_prepare_thread()
    f.pointee.owner = UInt(bitPattern: ccoro_thread_token())
    guard let r = StackAllocator.shared.take(size: f.pointee.stackSize) else {
        f.pointee.machine.failToStart()
        return false
    }
    r.pointee.running = ccoro_running(guard_lo: r.pointee.stack.guard_lo, guard_hi: r.pointee.stack.base,
                                      name: generatorStackName, stack_size: r.pointee.stack.size)
    r.pointee.fiber = ccoro_fiber_create()
    ccoro_make(&f.pointee.context, r.pointee.stack.top, generatorEntry, UnsafeMutableRawPointer(f))
    f.pointee.stack = r
    f.pointee.stackLow = UInt(bitPattern: r.pointee.stack.base)
    f.pointee.stackHigh = UInt(bitPattern: r.pointee.stack.top)
    if let canary = r.pointee.stack.canary { f.pointee.canary = UnsafePointer(canary) }
    generatorSwitchIn(f)
    return true
}

/// Resumes a suspended body (its phase is already `.running`): checks the thread, switches to the
/// generator's stack and returns when the body yields or ends.
@inlinable @inline(__always)
func generatorResume(_ f: UnsafeMutablePointer<GeneratorFrame>) {
    if f.pointee.owner != UInt(bitPattern: ccoro_thread_token()) { generatorTrapForeignThread() }
    generatorSwitchIn(f)
}

@usableFromInline
func generatorTrapForeignThread() -> Never {
    fatalError("generator resumed on a different thread (a generator's body must be resumed and released on the thread where it suspended)")
}

/// Switches from the consumer to the generator's stack; returns when the body yields or ends.
/// Releases the stack once the body has ended.
///
/// Inlined into `next()` (and the body's `yield` inlines `generatorSuspend`), so that no call
/// frame sits between the user's code and `ccoro_switch` on either side: every extra frame would
/// cost a mispredicted return per switch, as the return predictor cannot follow a stack switch.
@inlinable @inline(__always)
func generatorSwitchIn(_ f: UnsafeMutablePointer<GeneratorFrame>) {
    let r = f.pointee.stack.unsafelyUnwrapped
    if let c = ccoro_tls_coroutine() { adoptHost(c, f, r) }
    f.pointee.previousRunning = ccoro_tls_running()
    ccoro_tls_set_running(&r.pointee.running)
    swapContext(&f.pointee.context,
                target: (r.pointee.fiber, UnsafeRawPointer(r.pointee.stack.base), r.pointee.stack.size),
                fakeStack: &f.pointee.consumerFakeStack, currentFiber: &f.pointee.consumerFiber)
    ccoro_tls_set_running(f.pointee.previousRunning)
    if f.pointee.hostRecord != nil { releaseHost(f) }
    if f.pointee.machine.phase == .finished { releaseStack(f) }
}

/// The body yields: switches back to the consumer and returns when `next()` (or a cancellation)
/// resumes it.
///
/// - Throws: `CancellationError` if it was resumed to unwind (`cancel()` or release).
@inlinable @inline(__always)
func generatorSuspend(_ f: UnsafeMutablePointer<GeneratorFrame>) throws {
    let r = f.pointee.stack.unsafelyUnwrapped
    if f.pointee.canary.pointee != CCORO_CANARY_VALUE { generatorReportSmashedCanary(r) }
    swapContext(&f.pointee.context,
                target: (f.pointee.consumerFiber, f.pointee.consumerBottom, f.pointee.consumerSize),
                fakeStack: &r.pointee.fake_stack,
                previousStackBottom: &f.pointee.consumerBottom, previousStackSize: &f.pointee.consumerSize)
    if f.pointee.machine.cancelled { throw CancellationError() }
}

/// Whether the caller runs on the generator's own stack (so a `yield` belongs to this body).
///
/// The bounds alone say it: only the body runs on that stack, and the phase is `.running`
/// whenever it does (the bounds are 0 before the stack is taken and after it is given back).
@inlinable @inline(__always)
func generatorIsOnOwnStack(_ f: UnsafeMutablePointer<GeneratorFrame>) -> Bool {
    let here = UInt(bitPattern: ccoro_frame_address())
    return here &- f.pointee.stackLow < f.pointee.stackHigh &- f.pointee.stackLow
}

/// Reports a release of a suspended generator on a thread other than its own (<doc:Generators>):
/// its stack cannot be unwound from here, so it is leaked. Printed once per process.
func generatorReportForeignRelease() {
    if foreignReleaseReported.exchange(true, ordering: .relaxed) { return }
    let line = "swift-coroutines: a suspended generator was released on a thread other than the one it runs on; its stack is leaked (reported once)\n"
    line.withCString { _ = write(2, $0, strlen($0)) }
}

private let foreignReleaseReported = Atomic<Bool>(false)

/// Makes the consumer coroutine's record describe the generator's stack while the body runs.
@usableFromInline @inline(never)
func adoptHost(_ c: UnsafeMutableRawPointer, _ f: UnsafeMutablePointer<GeneratorFrame>,
                       _ r: UnsafeMutablePointer<ccoro_stack_record>) {
    guard let h = Unmanaged<Coroutine>.fromOpaque(c)._withUnsafeGuaranteedRef({ $0.record }) else { return }
    f.pointee.hostRecord = h
    f.pointee.hostStack = h.pointee.stack
    f.pointee.hostRunning = h.pointee.running
    f.pointee.hostFiber = h.pointee.fiber
    h.pointee.stack = r.pointee.stack
    h.pointee.running = r.pointee.running
    h.pointee.fiber = r.pointee.fiber
}

@usableFromInline @inline(never)
func releaseHost(_ f: UnsafeMutablePointer<GeneratorFrame>) {
    let h = f.pointee.hostRecord.unsafelyUnwrapped
    h.pointee.stack = f.pointee.hostStack
    h.pointee.running = f.pointee.hostRunning
    h.pointee.fiber = f.pointee.hostFiber
    f.pointee.hostRecord = nil
}

/// Gives a finished body's stack back to the pool (control has left it for good).
@usableFromInline @inline(never)
func releaseStack(_ f: UnsafeMutablePointer<GeneratorFrame>) {
    guard let r = f.pointee.stack else { return }
    f.pointee.stack = nil
    f.pointee.stackLow = 0
    f.pointee.stackHigh = 0
    f.pointee.canary = intactCanary
    ccoro_fiber_destroy(r.pointee.fiber)
    r.pointee.fiber = nil
    StackAllocator.shared.give(r)
}

private func checkCanary(_ r: UnsafeMutablePointer<ccoro_stack_record>) {
    if ccoro_stack_canary_ok(&r.pointee.stack) == 0 { generatorReportSmashedCanary(r) }
}

@usableFromInline
func generatorReportSmashedCanary(_ r: UnsafeMutablePointer<ccoro_stack_record>) -> Never {
    ccoro_report_overflow(generatorStackName, r.pointee.stack.size, "stack canary smashed (slab stack)")
}

/// The C entry of every generator stack (called by the assembly trampoline). It never returns;
/// its frame holds no Swift reference when it switches out for the last time.
private let generatorEntry: @convention(c) (UnsafeMutableRawPointer?) -> Void = { arg in
    let f = runGeneratorBody(arg.unsafelyUnwrapped)
    let r = f.pointee.stack.unsafelyUnwrapped
    swapContext(&f.pointee.context,
                target: (f.pointee.consumerFiber, f.pointee.consumerBottom, f.pointee.consumerSize),
                fakeStack: nil)
    fatalError("internal inconsistency: a finished generator was resumed")
}

/// Runs the body (which catches everything) and marks the generator finished. Non-throwing.
@inline(never)
private func runGeneratorBody(_ arg: UnsafeMutableRawPointer) -> UnsafeMutablePointer<GeneratorFrame> {
    let f = arg.assumingMemoryBound(to: GeneratorFrame.self)
    enterFreshStack(previousStackBottom: &f.pointee.consumerBottom, previousStackSize: &f.pointee.consumerSize)
    let run = f.pointee.run
    run(f.pointee.object.unsafelyUnwrapped)
    checkCanary(f.pointee.stack.unsafelyUnwrapped)
    f.pointee.machine.finish()
    return f
}
