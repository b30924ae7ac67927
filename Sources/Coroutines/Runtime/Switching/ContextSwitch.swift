import CCoroutines

/// Switches from the current stack to the context saved in `to`, with the sanitizers' fiber
/// annotations around the switch: with ``swapContext(_:target:fakeStack:currentFiber:previousStackBottom:previousStackSize:)``,
/// the package's only switches.
///
/// Every switch between stacks goes through one of the two: the loop to a coroutine, a coroutine
/// to the next one or back to the loop (``CoroutineScheduler/transfer(from:to:)``,
/// ``CoroutineScheduler/switchAway(from:)``) and the last switch out of a finished coroutine's
/// stack through this one; a generator's consumer to its body and back (`generatorSwitchIn`,
/// `generatorSuspend`, and the last switch out of a finished body) through `swapContext`. A
/// stack entered for the first time completes the switch with
/// ``enterFreshStack(previousStackBottom:previousStackSize:)``.
///
/// Without ThreadSanitizer or AddressSanitizer (`ccoro_fibers_active == 0`) this is one test and
/// the bare switch, inlined into every caller: a call frame between the caller and
/// `ccoro_switch` would cost a mispredicted return per switch (the return predictor cannot
/// follow a stack switch). With a sanitizer, the annotated switch runs out of line
/// (``switchContextAnnounced(from:to:target:fakeStack:returning:currentFiber:previousStackBottom:previousStackSize:)``),
/// so that its bookkeeping costs the uninstrumented callers no registers.
///
/// - Parameters:
///   - from: Where the current stack's registers are saved; it resumes when something switches
///     back to it.
///   - to: The saved context to resume.
///   - target: The target stack as the sanitizers know it (see ``SanitizerStack``). Only the
///     sanitizer path uses it: in a build without one, the optimiser moves its loads there.
///   - fakeStack: Where AddressSanitizer keeps the current stack's fake stack while it is
///     switched out. Nil when the current stack is left for good (its coroutine or generator
///     has finished): the switch then never comes back.
///   - returning: `ret` into the target (`ccoro_switch`): only where both sides suspended at the
///     same call site, so that the return prediction hits. Otherwise an indirect jump
///     (`ccoro_switch_jump`).
///   - currentFiber: Receives the current stack's ThreadSanitizer fiber before the switch, for a
///     target that switches back to whoever switched to it (a generator's body).
///   - previousStackBottom, previousStackSize: Receive the bounds of the stack that switches back
///     here (AddressSanitizer reports them), for a side that does not know who resumes it (a
///     generator's consumer).
@inlinable @inline(__always)
func switchContext(from: UnsafeMutablePointer<ccoro_context>, to: UnsafePointer<ccoro_context>,
                   target: SanitizerStack,
                   fakeStack: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                   returning: Bool = false,
                   currentFiber: UnsafeMutablePointer<UnsafeMutableRawPointer?>? = nil,
                   previousStackBottom: UnsafeMutablePointer<UnsafeRawPointer?>? = nil,
                   previousStackSize: UnsafeMutablePointer<Int>? = nil) {
    if ccoro_fibers_active != 0 {
        switchContextAnnounced(from: from, to: to, target: target, fakeStack: fakeStack, returning: returning,
                               currentFiber: currentFiber, previousStackBottom: previousStackBottom,
                               previousStackSize: previousStackSize)
    } else if returning {
        ccoro_switch(from, to)
    } else {
        ccoro_switch_jump(from, to)
    }
}

/// ``switchContext(from:to:target:fakeStack:returning:currentFiber:previousStackBottom:previousStackSize:)``
/// for two stacks that only ever switch to each other (a generator's consumer and its body): one
/// context serves both sides (`ccoro_switch_swap`). It holds the saved registers of whichever side
/// is switched out, so each side passes the one address it keeps in a register, and no load
/// stands between the registers a switch restores and the address the next switch reads (each
/// such load lengthens the chain every round trip waits for: docs/Performance.md).
///
/// - Parameters:
///   - context: The pair's context: the target's saved registers on entry, this side's once it
///     has switched away.
///   - target, fakeStack, currentFiber, previousStackBottom, previousStackSize: As for
///     `switchContext`.
@inlinable @inline(__always)
func swapContext(_ context: UnsafeMutablePointer<ccoro_context>,
                 target: SanitizerStack,
                 fakeStack: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                 currentFiber: UnsafeMutablePointer<UnsafeMutableRawPointer?>? = nil,
                 previousStackBottom: UnsafeMutablePointer<UnsafeRawPointer?>? = nil,
                 previousStackSize: UnsafeMutablePointer<Int>? = nil) {
    if ccoro_fibers_active != 0 {
        switchContextAnnounced(from: context, to: nil, target: target, fakeStack: fakeStack, returning: false,
                               currentFiber: currentFiber, previousStackBottom: previousStackBottom,
                               previousStackSize: previousStackSize)
    } else {
        ccoro_switch_swap(context)
    }
}

/// ``switchContext(from:to:target:fakeStack:returning:currentFiber:previousStackBottom:previousStackSize:)``
/// (or, with `to` nil, ``swapContext(_:target:fakeStack:currentFiber:previousStackBottom:previousStackSize:)``)
/// in a build with ThreadSanitizer or AddressSanitizer: announces the switch to the sanitizers
/// (`ccoro_fiber_will_switch`), switches, and when something switches back, completes it
/// (`ccoro_fiber_did_switch`, or `ccoro_fiber_did_switch_from` to learn the resumer's stack).
/// The parameters are `switchContext`'s.
@usableFromInline @inline(never)
func switchContextAnnounced(from: UnsafeMutablePointer<ccoro_context>, to: UnsafePointer<ccoro_context>?,
                            target t: SanitizerStack,
                            fakeStack: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                            returning: Bool,
                            currentFiber: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                            previousStackBottom: UnsafeMutablePointer<UnsafeRawPointer?>?,
                            previousStackSize: UnsafeMutablePointer<Int>?) {
    if let currentFiber { currentFiber.pointee = ccoro_fiber_current() }
    ccoro_fiber_will_switch(t.fiber, t.bottom, t.size, fakeStack, fakeStack == nil ? 1 : 0)
    if let to {
        if returning {
            ccoro_switch(from, to)
        } else {
            ccoro_switch_jump(from, to)
        }
    } else {
        ccoro_switch_swap(from)
    }
    guard let fakeStack else { return }   // left for good: nothing switches back
    if let previousStackBottom, let previousStackSize {
        ccoro_fiber_did_switch_from(fakeStack.pointee, previousStackBottom, previousStackSize)
    } else {
        ccoro_fiber_did_switch(fakeStack.pointee)
    }
}

/// A stack as the sanitizers know it: its ThreadSanitizer fiber, and for AddressSanitizer its
/// lowest address (nil: a thread's own stack, which it knows already) and usable size.
@usableFromInline
typealias SanitizerStack = (fiber: UnsafeMutableRawPointer?, bottom: UnsafeRawPointer?, size: Int)

/// The first thing code does on a fresh stack, entered through its trampoline: completes for the
/// sanitizers the ``switchContext(from:to:target:fakeStack:returning:currentFiber:previousStackBottom:previousStackSize:)``
/// that started it (the stack has no fake stack yet).
///
/// - Parameters:
///   - previousStackBottom, previousStackSize: As for `switchContext`: receive the bounds of the
///     stack that switched here (a generator's consumer).
@inline(__always)
func enterFreshStack(previousStackBottom: UnsafeMutablePointer<UnsafeRawPointer?>? = nil,
                     previousStackSize: UnsafeMutablePointer<Int>? = nil) {
    if let previousStackBottom, let previousStackSize {
        ccoro_fiber_did_switch_from(nil, previousStackBottom, previousStackSize)
    } else {
        ccoro_fiber_did_switch(nil)
    }
}
