import Foundation
import Testing
@testable import Coroutines

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

/// The floating-point control state (rounding mode, flush-to-zero) belongs to each coroutine: the
/// switch saves and restores it (on x86_64 the x87 control word and MXCSR's control bits, loaded
/// only when they differ), so a change in one coroutine neither leaks into another coroutine or
/// the scheduler loop, nor is lost across the coroutine's own suspensions. A generator's body runs
/// inside its consumer's `next()` and shares the consumer's, as a function shares its caller's
/// (<doc:Generators>).
@Suite("Floating-point environment per coroutine")
struct FloatingPointEnvironmentTests {
    /// 1/3 rounded to nearest (a literal: a computed constant would be computed lazily, maybe in
    /// a changed mode). Rounded upward, 1/3 is the next double.
    static let third = 0x1.5555555555555p-2

    /// What the calling context's floating-point control state looks like, from its effects:
    /// the rounding mode both as `fegetround` reports it and as an SSE division rounds, and
    /// whether a subnormal result is flushed to zero.
    struct Mode: Equatable, Sendable, CustomStringConvertible {
        var reported: Int32
        var divisionRoundsUp: Bool
        var flushesToZero: Bool

        // Out of line: inlined, the optimiser computes the divisions (pure, as LLVM sees them)
        // once for all the reads in a function, before an fesetround or a switch between them
        // (in a release build, a generator body's four reads divided once, at its start).
        @inline(never)
        static var current: Mode {
            let q = Kit.opaque(1.0) / Kit.opaque(3.0)
            let tiny = Kit.opaque(Double.leastNormalMagnitude) / Kit.opaque(4.0)
            return Mode(reported: fegetround(), divisionRoundsUp: q > FloatingPointEnvironmentTests.third,
                        flushesToZero: tiny == 0)
        }

        static let standard = Mode(reported: FE_TONEAREST, divisionRoundsUp: false, flushesToZero: false)
        static let changed = Mode(reported: FE_UPWARD, divisionRoundsUp: true, flushesToZero: true)

        var description: String { "round \(reported) up \(divisionRoundsUp) ftz \(flushesToZero)" }
    }

    #if arch(x86_64)
    /// Sets or clears MXCSR's flush-to-zero bit (15) through the environment (Glibc has no call
    /// for it alone).
    static func setFlushToZero(_ on: Bool) {
        var env = fenv_t()
        fegetenv(&env)
        if on { env.__mxcsr |= 0x8000 } else { env.__mxcsr &= ~UInt32(0x8000) }
        fesetenv(&env)
    }
    #endif

    /// Switches the calling context to round upward and flush to zero.
    static func change() {
        fesetround(FE_UPWARD)
        #if arch(x86_64)
        setFlushToZero(true)
        #endif
    }

    static func restore() {
        fesetround(FE_TONEAREST)
        #if arch(x86_64)
        setFlushToZero(false)
        #endif
    }

    @Test("a coroutine that rounds upward and flushes to zero keeps its mode across 200 yields, while another coroutine on the same scheduler keeps the default through the same switches")
    func modeStaysWithItsCoroutine() async throws {
        let seen = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            // Given a coroutine that changed its mode, and one that did not, taking turns
            let changed = Coroutine.launch {
                Self.change()
                defer { Self.restore() }
                #if arch(x86_64)
                let expected = Mode.changed
                #else
                let expected = Mode(reported: FE_UPWARD, divisionRoundsUp: true, flushesToZero: Mode.current.flushesToZero)
                #endif
                for i in 0..<200 {
                    try Coroutine.yield()
                    // Then its own mode is the one it set
                    if Mode.current != expected { log.append("changed coroutine at \(i): \(Mode.current)") }
                    _ = Kit.opaque(1.0) / Kit.opaque(Double(i + 3))   // raises inexact: the flags differ
                }
            }
            let standard = Coroutine.launch {
                for i in 0..<200 {
                    try Coroutine.yield()
                    // And the other's is the default
                    if Mode.current != .standard { log.append("default coroutine at \(i): \(Mode.current)") }
                }
            }
            // When they switch to each other (and to this one) 200 times
            try changed.join()
            try standard.join()
            if Mode.current != .standard { log.append("runner after: \(Mode.current)") }
            return log.all
        }
        #expect(seen.isEmpty, "\(seen.prefix(5))")
    }

    @Test("the scheduler loop, and the coroutine that changed the mode after it resumes, each see their own mode while that coroutine is suspended")
    func modeDoesNotLeakIntoTheLoop() async throws {
        try await Kit.withScheduler("fp-loop") { s in
            let suspended = Promise<Void>()
            let resume = Promise<Void>()
            // Given a coroutine that changed its mode and then suspended
            let changed = Coroutine.async(on: s) { () -> Mode in
                Self.change()
                defer { Self.restore() }
                suspended.fulfill(())
                try resume.await()
                return Mode.current
            }
            try await suspended.value
            // When the loop runs a job meanwhile
            let onLoop = try await Kit.onSchedulerLoop(s) { Mode.current }
            let otherCoroutine = try await Coroutine.async(on: s) { Mode.current }.value
            resume.fulfill(())
            // Then the loop and another coroutine see the default, and the coroutine its own mode
            #expect(onLoop == .standard)
            #expect(otherCoroutine == .standard)
            let own = try await changed.value
            #expect(own.reported == FE_UPWARD)
            #expect(own.divisionRoundsUp)
            #if arch(x86_64)
            #expect(own.flushesToZero)
            #endif
            // And after it ended, the scheduler thread is back to the default
            #expect(try await Kit.onSchedulerLoop(s) { Mode.current } == .standard)
        }
    }

    /// Whether `m` is what ``change()`` sets (flush-to-zero is checked on x86_64 only).
    static func isChanged(_ m: Mode) -> Bool {
        #if arch(x86_64)
        return m == .changed
        #else
        return m.reported == FE_UPWARD && m.divisionRoundsUp
        #endif
    }

    @Test("a generator body shares its consumer's mode, as a function it calls would: it starts with the consumer's, a change in the body is the consumer's once next() returns, one in the consumer is the body's at its next resume, and a coroutine that runs while the body suspends its consumer keeps its own")
    func generatorSharesItsConsumersMode() async throws {
        let (inBody, inConsumer, bystander) = try await Kit.run { () -> ([Mode], [Mode], [String]) in
            let log = Kit.Log<String>()
            let bodySuspendedConsumer = Kit.Log<Bool>()
            // Given a coroutine beside the consumer that keeps the default mode
            let other = Coroutine.launch {
                for _ in 0..<3 {
                    log.append("\(bodySuspendedConsumer.all.last ?? false) \(Mode.current == .standard)")
                    try Coroutine.yield()
                }
            }
            // And a generator whose body records its mode at each yield, restores the default
            // once, and suspends its consumer once
            let g = Generator<Mode> { yield in
                try yield(Mode.current)
                Self.restore()
                try yield(Mode.current)
                try yield(Mode.current)
                bodySuspendedConsumer.append(true)
                try Coroutine.yield()
                bodySuspendedConsumer.append(false)
                try yield(Mode.current)
            }
            var inBody: [Mode] = [], inConsumer: [Mode] = []
            // When the consumer changes its mode and starts the body
            Self.change()
            inBody.append(g.next()!)
            inConsumer.append(Mode.current)
            // When the body restores the default
            inBody.append(g.next()!)
            inConsumer.append(Mode.current)
            // When the consumer changes its mode again, and the body suspends it meanwhile
            Self.change()
            inBody.append(g.next()!)
            inBody.append(g.next()!)
            inConsumer.append(Mode.current)
            Self.restore()
            try other.join()
            return (inBody, inConsumer, log.all)
        }
        // Then the body started with the consumer's changed mode and saw each change the
        // consumer made, the consumer saw the body's restore, and the change outlived the
        // consumer's suspension inside the body
        #expect(inBody.map(Self.isChanged) == [true, false, true, true], "\(inBody)")
        #expect(inConsumer.map(Self.isChanged) == [true, false, true], "\(inConsumer)")
        #expect(inBody[1] == .standard && inConsumer[1] == .standard)
        // And the coroutine beside them kept the default, also while the body had suspended
        // the consumer in the changed mode
        #expect(bystander.contains("true true"), "\(bystander)")
        #expect(bystander.allSatisfy { $0.hasSuffix("true") }, "\(bystander)")
    }

    @Test("a generator driven in turn by two coroutines on one scheduler finds at each resume the mode of the coroutine that resumes it, and each coroutine keeps its own across the other's turns")
    func generatorDrivenByTwoCoroutinesInTurn() async throws {
        let log = try await Kit.run { () -> [String] in
            final class Shared: @unchecked Sendable { var g: Generator<Mode>? }
            let shared = Shared()
            shared.g = Generator<Mode> { yield in while true { try yield(Mode.current) } }
            let log = Kit.Log<String>()
            // Given coroutine A in the changed mode and coroutine B in the default one, taking
            // the elements of one generator in turn
            let a = Coroutine.launch {
                Self.change()
                defer { Self.restore() }
                for _ in 0..<3 {
                    let inBody = shared.g!.next()!
                    log.append("A body \(Self.isChanged(inBody)) own \(Self.isChanged(Mode.current))")
                    try Coroutine.yield()
                }
            }
            let b = Coroutine.launch {
                for _ in 0..<3 {
                    let inBody = shared.g!.next()!
                    log.append("B body \(inBody == .standard) own \(Mode.current == .standard)")
                    try Coroutine.yield()
                }
            }
            try a.join()
            try b.join()
            shared.g = nil
            return log.all
        }
        // Then the body ran in A's mode for A and in B's for B, and neither's mode leaked into
        // the other's
        #expect(log.count == 6)
        #expect(Set(log.map { $0.prefix(1) }) == ["A", "B"], "\(log)")
        #expect(log.allSatisfy { $0.hasSuffix("body true own true") }, "\(log)")
    }

    #if arch(x86_64)
    // MARK: x87 precision control

    /// The x87 control word's precision control (bits 8-9), which nothing else in this suite
    /// changes: `fesetround` changes the rounding bits of the x87 control word and of MXCSR
    /// together, so the tests above never switch between two contexts whose x87 control words
    /// differ in the precision only — where a switch that compared only the rounding bits would
    /// skip the load.
    struct X87: Equatable, Sendable, CustomStringConvertible {
        /// The x87 control word as `fegetenv` reads it.
        var controlWord: UInt16
        /// Whether a Float80 division (an x87 `fdiv`) rounds to a double's 53-bit significand:
        /// 1/3 then has its low 11 of 64 significand bits zero.
        var dividesInDoublePrecision: Bool

        // Out of line, as Mode.current.
        @inline(never)
        static var current: X87 {
            var env = fenv_t()
            fegetenv(&env)
            let q = Kit.opaque(Float80(1)) / Kit.opaque(Float80(3))
            return X87(controlWord: env.__control_word, dividesInDoublePrecision: q.significandBitPattern & 0x7FF == 0)
        }

        /// Linux's default: extended precision, round to nearest, exceptions masked.
        static let standard = X87(controlWord: 0x037F, dividesInDoublePrecision: false)
        /// Double precision (precision control 10b), everything else as the default.
        static let double = X87(controlWord: 0x027F, dividesInDoublePrecision: true)

        var description: String {
            "x87 control word 0x\(String(controlWord, radix: 16)), double precision \(dividesInDoublePrecision)"
        }
    }

    /// Sets the x87 precision control of the calling context to double (53 bits) or back to
    /// extended (64 bits), leaving the rounding mode and MXCSR alone.
    static func setX87DoublePrecision(_ on: Bool) {
        var env = fenv_t()
        fegetenv(&env)
        env.__control_word = (env.__control_word & ~0x0300) | (on ? 0x0200 : 0x0300)
        fesetenv(&env)
    }

    @Test("a coroutine that lowers the x87 precision to a double's keeps it across 200 yields, while two coroutines beside it keep extended precision (switches between them find equal control words, those to and from it differ in the precision only)")
    func x87PrecisionStaysWithItsCoroutine() async throws {
        let seen = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            if X87.current != .standard { log.append("runner before: \(X87.current)") }
            // Given a coroutine that changed its precision, and two that did not, taking turns
            let changed = Coroutine.launch {
                Self.setX87DoublePrecision(true)
                defer { Self.setX87DoublePrecision(false) }
                for i in 0..<200 {
                    try Coroutine.yield()
                    // Then its own precision is the one it set, and its rounding mode the default
                    if X87.current != .double { log.append("changed coroutine at \(i): \(X87.current)") }
                    if Mode.current != .standard { log.append("changed coroutine at \(i): \(Mode.current)") }
                }
            }
            let standard = (0..<2).map { k in
                Coroutine.launch {
                    for i in 0..<200 {
                        try Coroutine.yield()
                        // And the others' is the default
                        if X87.current != .standard { log.append("default coroutine \(k) at \(i): \(X87.current)") }
                    }
                }
            }
            // When they switch to each other (and to this one) 200 times
            try changed.join()
            for c in standard { try c.join() }
            if X87.current != .standard { log.append("runner after: \(X87.current)") }
            return log.all
        }
        #expect(seen.isEmpty, "\(seen.prefix(5))")
    }

    @Test("a generator body shares its consumer's x87 precision: a body that lowers it lowers the consumer's once next() returns, and a generator started by a consumer that lowered it starts with double precision")
    func x87PrecisionIsSharedWithGenerators() async throws {
        let (inBody, inConsumer, freshBody) = try await Kit.run { () -> ([X87], [X87], X87?) in
            // Given a body that lowers its precision after its first yield and restores it
            // before its third
            let g = Generator<X87> { yield in
                try yield(X87.current)
                Self.setX87DoublePrecision(true)
                try yield(X87.current)
                Self.setX87DoublePrecision(false)
                try yield(X87.current)
            }
            var inBody: [X87] = [], inConsumer: [X87] = []
            // When a consumer with the default precision takes its elements
            while let m = g.next() {
                inBody.append(m)
                inConsumer.append(X87.current)
            }
            // And a consumer that lowered its precision starts a fresh generator
            Self.setX87DoublePrecision(true)
            defer { Self.setX87DoublePrecision(false) }
            let fresh = Generator<X87> { yield in try yield(X87.current) }
            return (inBody, inConsumer, fresh.next())
        }
        // Then consumer and body saw the same precision at each element, the body's change
        // included
        #expect(inBody == [.standard, .double, .standard], "\(inBody.map(\.description))")
        #expect(inConsumer == inBody, "\(inConsumer.map(\.description))")
        // And the fresh body started with its consumer's
        #expect(freshBody == .double)
    }
    #endif
}
