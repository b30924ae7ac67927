import CCoroutines
import Foundation
import Synchronization
import CoroutinesTestSupport
import Testing
@testable import Coroutines

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

/// Recurses until the stack runs out. The local array lives in this frame and is read after the
/// recursive call, so the call is not a tail call and every frame costs stack.
@inline(never)
func recurseWithoutBound(_ depth: Int) -> Int {
    if depth < 0 { return 0 }   // never: depth only grows (keeps the compiler from calling this infinite)
    var frame = InlineArray<64, Int>(repeating: depth)
    frame[depth & 63] &+= 1
    let below = recurseWithoutBound(CoroutineTestKit.opaque(depth &+ 1))
    return below &+ frame[(depth &* 7) & 63]
}

/// A class whose stored properties are accessed through `inout` (dynamic exclusivity checks).
final class ExclusiveCell: @unchecked Sendable {
    var a = 0
    var b = 0
}

/// Holds an exclusive (modify) access to `x` while suspended for `duration`.
@inline(never)
func modify(_ x: inout Int, suspendingFor duration: Duration) throws {
    x += 1
    try Coroutine.delay(duration)
    x += 10
}

/// Stack sizes, guard regions, pooling, slab stacks, exclusivity: see the Stacks and
/// BadInputAndMisuse articles (<doc:Stacks>, <doc:BadInputAndMisuse>).
@Suite("Coroutine stacks")
struct StackTests {
    // MARK: Sizes

    @Test("stackSize is rounded up to a multiple of 16 KiB, default 256 KiB",
          arguments: [(nil, 256 * 1024), (1, 16 * 1024), (1000, 16 * 1024), (16 * 1024, 16 * 1024),
                      (16 * 1024 + 1, 32 * 1024), (100_000, 112 * 1024), (64 * 1024 * 1024, 64 * 1024 * 1024)] as [(Int?, Int)])
    func stackSizeRounding(requested: Int?, expected: Int) {
        #expect(StackAllocator.normalizedSize(requested) == expected)
    }

    @Test("a coroutine with a stack smaller than 16 KiB runs on a 16 KiB stack with a guard region below")
    func smallStackRuns() async throws {
        let seen = try await Kit.run { () -> [Int] in
            let child = Coroutine.async(stackSize: 1000) { () -> [Int] in
                let me = Coroutine.current!
                let s = me.record!.pointee.stack
                var local = 0
                let inside = withUnsafeMutablePointer(to: &local) { p in
                    UnsafeMutableRawPointer(p) >= s.base! && UnsafeMutableRawPointer(p) < s.top!
                }
                let guardBytes = s.base! - s.guard_lo!
                return [me.stackSize, s.size, inside ? 1 : 0, s.is_slab != 0 ? -1 : guardBytes]
            }
            return try child.await()
        }
        let (size, usable, inside, guardBytes) = (seen[0], seen[1], seen[2], seen[3])
        #expect(size == 16 * 1024)
        #expect(usable >= 16 * 1024 - 64)
        #expect(inside == 1)
        #expect(guardBytes == -1 || guardBytes >= 64 * 1024)
    }

    // MARK: Cache colours

    @Test("consecutive guarded stacks put their tops at different page colours modulo 128 KiB, guards intact")
    func guardedStacksAreColoured() throws {
        let span = Int(CCORO_COLOR_SPAN), page = Int(ccoro_page_size())
        var stacks = [ccoro_stack](repeating: ccoro_stack(), count: span / page)
        defer { for i in stacks.indices { ccoro_stack_unmap_guarded(&stacks[i]) } }
        for i in stacks.indices { #expect(ccoro_stack_map_guarded(64 * 1024, &stacks[i]) == 0) }
        var colours = Set<Int>()
        for s in stacks {
            let top = Int(bitPattern: s.top), base = Int(bitPattern: s.base), low = Int(bitPattern: s.guard_lo)
            #expect(top - base == 64 * 1024 && s.size == 64 * 1024)
            #expect(base - low >= Int(CCORO_GUARD_SIZE))
            #expect(top <= low + s.mapping_size)
            colours.insert(top % span)
        }
        // The stacks take the colours in turn (uncoloured, tops 192 KiB apart show 2). Stacks
        // mapped meanwhile by tests running in parallel take colours too, hence not all 32.
        #expect(colours.count >= span / page / 2)
    }

    @Test("consecutive slab slots put their tops at different page colours modulo 128 KiB")
    func slabSlotsAreColoured() throws {
        let span = Int(CCORO_COLOR_SPAN), page = Int(ccoro_page_size())
        var slots = [ccoro_stack](repeating: ccoro_stack(), count: span / page)
        #expect(ccoro_stack_map_slab(64 * 1024, slots.count, &slots) == 0)
        defer { munmap(slots[0].mapping, slots[0].mapping_size) }
        let colours = Set(slots.map { (Int(bitPattern: $0.top) + 64) % span })
        #expect(colours.count == span / page)
        #expect(slots.allSatisfy { $0.size >= 64 * 1024 - 64 && $0.class_size == 64 * 1024 })
    }

    @Test("a coroutine without stackSize gets 256 KiB and can use most of it")
    func defaultStackUsable() async throws {
        let (size, sum) = try await Kit.run { () -> (Int, Int) in
            let c = Coroutine.async { () -> (Int, Int) in
                // About 100 KiB of stack in one frame.
                let sum = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 100 * 1024) { buf in
                    buf.initialize(repeating: 1)
                    return Kit.opaque(buf).reduce(0) { $0 + Int($1) }
                }
                return (Coroutine.current!.stackSize, sum)
            }
            return try c.await()
        }
        #expect(size == 256 * 1024)
        #expect(sum == 100 * 1024)
    }

    // MARK: Guard regions and canaries

    /// Guards an invariant (coloured stacks).
    @Test("guarded stacks of several sizes: guard >= 64 KiB, whole stack writable, top inside the mapping")
    func guardedStacksGuardAndBounds() throws {
        let page = Int(ccoro_page_size())
        for size in [16 * 1024, 64 * 1024, 256 * 1024, 256 * 1024 + page, 1024 * 1024] {
            var stacks = [ccoro_stack](repeating: ccoro_stack(), count: 40)
            defer { for i in stacks.indices { ccoro_stack_unmap_guarded(&stacks[i]) } }
            for i in stacks.indices { #expect(ccoro_stack_map_guarded(size, &stacks[i]) == 0) }
            for s in stacks {
                let m = Int(bitPattern: s.mapping), top = Int(bitPattern: s.top), base = Int(bitPattern: s.base)
                #expect(Int(bitPattern: s.guard_lo) == m)
                #expect(base - m >= Int(CCORO_GUARD_SIZE))
                #expect(top - base == size && s.size == size)
                #expect(top <= m + s.mapping_size)
                #expect(top % page == 0 && base % page == 0)
                // The whole usable stack is writable; release_memory leaves it usable.
                memset(s.base, 0x5A, size)
                ccoro_stack_release_memory([s])
                #expect(s.base.load(as: UInt8.self) == 0)
                memset(s.base, 0x5A, size)
            }
        }
    }

    /// Guards an invariant (coloured stacks).
    @Test("slab slots: using a whole slot and releasing its memory leaves every canary intact")
    func slabCanariesSurviveUseAndRelease() throws {
        let count = 40
        var slots = [ccoro_stack](repeating: ccoro_stack(), count: count)
        #expect(ccoro_stack_map_slab(64 * 1024, count, &slots) == 0)
        defer { munmap(slots[0].mapping, slots[0].mapping_size) }
        for s in slots { ccoro_stack_arm_canary([s]) }
        for (i, s) in slots.enumerated() {
            // Every byte a coroutine may use: [base, top).
            memset(s.base, 0xEE, Int(bitPattern: s.top) - Int(bitPattern: s.base))
            #expect(slots.allSatisfy { ccoro_stack_canary_ok([$0]) != 0 }, "slot \(i) smashed a canary")
            ccoro_stack_release_memory([s])
            #expect(slots.allSatisfy { ccoro_stack_canary_ok([$0]) != 0 }, "releasing slot \(i) lost a canary")
            if i > 0 {
                // The canary sits just below the slot, in the top 64 bytes of the slot below.
                let canary = Int(bitPattern: s.canary)
                #expect(canary == Int(bitPattern: s.base) - 8)
                #expect(canary >= Int(bitPattern: slots[i - 1].top))
            }
        }
        #expect(Int(bitPattern: slots[count - 1].top) + 64 == Int(bitPattern: slots[0].mapping) + slots[0].mapping_size)
    }
}

/// Checks that need a process of their own: traps (overflow, preconditions, exclusivity conflicts)
/// and the stress tests that read the allocator's global counters.
///
/// Each runs in a child process of its own (``ChildProcess``), awaited without holding a Swift
/// concurrency thread. Serialized, so that the heavy children (a million coroutines) do not
/// compete with each other for the two cores.
@Suite("Coroutine stacks, in a child process", .serialized, .enabled(if: TestEnvironment.exitTestsEnabled))
struct StackExitTests {
    @Test("stackSize of zero or less, or above 64 MiB, is a precondition failure")
    func stackSizeOutOfRange() async {
        for bad: Int in [0, -16, 64 * 1024 * 1024 + 1] {
            let result = await ChildProcess.run(.failure, id: "stackSizeOutOfRange.\(bad)") { [bad = bad as Int] in
                _ = Coroutine.launch(on: SchedulerPool.default(for: .default).next(), stackSize: bad) {}
            }
            #if DEBUG
            // Swift drops precondition messages in optimised builds.
            let stderr = result?.standardError ?? ""
            #expect(stderr.contains("stackSize"), "stderr for \(bad): \(stderr)")
            #else
            _ = result
            #endif
        }
    }

    // MARK: Overflow

    @Test("a stack overflow aborts with 'coroutine stack overflow', the coroutine's name and its stack size")
    func stackOverflow() async {
        let result = await ChildProcess.run(.failure, id: "stackOverflow") {
            let s = CoroutineScheduler(name: "overflow")
            let c = Coroutine.launch(on: s, name: "deep") { _ = recurseWithoutBound(0) }
            try await c.join()
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("coroutine stack overflow"), "stderr: \(stderr)")
        #expect(stderr.contains("deep"), "stderr: \(stderr)")
        #expect(stderr.contains("262144"), "stderr: \(stderr)")
    }

    /// The entry points a coroutine calls, each of which must check the stack bound first.
    enum BoundCheckedCall: String, CaseIterable, Sendable {
        case yield, delay, launch, async, send, receive, await
    }

    @Test("a runtime entry point called below the stack's lower bound aborts with 'coroutine stack overflow' and the coroutine's name",
          arguments: BoundCheckedCall.allCases)
    func entryPointBelowStackBound(call: BoundCheckedCall) async {
        let result = await ChildProcess.run(.failure, id: "entryPointBelowStackBound.\(call.rawValue)") { [call = call as BoundCheckedCall] in
            let s = CoroutineScheduler(name: "bound")
            let ch = Channel<Int>(capacity: 1)
            let c = Coroutine.launch(on: s, name: "below-bound") {
                // As on a slab stack (no guard page) after a frame ran past its end: the lower
                // bound is above the stack pointer. (Moving the recorded bound up to the stack's
                // top stands in for moving the stack pointer below it.)
                let r = Coroutine.current!.record!
                r.pointee.running.guard_hi = UnsafeMutableRawPointer(r.pointee.stack.top)
                switch call {
                case .yield: try Coroutine.yield()
                case .delay: try Coroutine.delay(.milliseconds(1))
                case .launch: Coroutine.launch {}
                case .async: _ = Coroutine.async { 1 }
                case .send: try ch.send(1)
                case .receive: _ = try ch.receive()
                case .await: _ = try Promise.fulfilled(1).await()
                }
                print("not stopped")
            }
            try await c.join()
        }
        let (stderr, stdout) = (result?.standardError ?? "", result?.standardOutput ?? "")
        #expect(stderr.contains("coroutine stack overflow in 'below-bound'"), "stderr: \(stderr)")
        #expect(stderr.contains("below the stack's lower bound"), "stderr: \(stderr)")
        #expect(!stdout.contains("not stopped"))
    }

    // MARK: Exclusivity

    @Test("two coroutines suspended inside exclusive accesses may end them in either order",
          arguments: [(10, 30), (30, 10)])
    func exclusiveAccessesEndInAnyOrder(aMillis: Int, bMillis: Int) async {
        // In a child process: a wrong access-set bookkeeping traps, which must not take down the run.
        await ChildProcess.run(.success, id: "exclusiveAccessesEndInAnyOrder.\(aMillis)-\(bMillis)") { [aMillis = aMillis as Int, bMillis = bMillis as Int] in
            let cell = ExclusiveCell()
            try await CoroutineTestKit.run {
                // Given A and B, each suspended inside a modify access of its own property.
                let a = Coroutine.launch { try modify(&cell.a, suspendingFor: .milliseconds(aMillis)) }
                let b = Coroutine.launch { try modify(&cell.b, suspendingFor: .milliseconds(bMillis)) }
                // When their delays end in the given order, each ends its access.
                try a.join()
                try b.join()
                // Then both accesses ended cleanly and a new access of each property is allowed.
                try modify(&cell.a, suspendingFor: .milliseconds(1))
                try modify(&cell.b, suspendingFor: .milliseconds(1))
            }
            #expect(cell.a == 22 && cell.b == 22, "a=\(cell.a) b=\(cell.b)")
        }
    }

    @Test("two coroutines modifying the same property while one is suspended trap like any Swift conflict")
    func exclusiveAccessConflictTraps() async {
        let result = await ChildProcess.run(.failure, id: "exclusiveAccessConflictTraps") {
            let cell = ExclusiveCell()
            try await CoroutineTestKit.run {
                _ = Coroutine.launch { try modify(&cell.a, suspendingFor: .milliseconds(20)) }
                _ = Coroutine.launch { try modify(&cell.a, suspendingFor: .milliseconds(1)) }
            }
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("Simultaneous accesses"), "stderr: \(stderr)")
    }

    // MARK: Many coroutines

    @Test("100,000 coroutines across a pool of 4 schedulers all finish and give their stacks back")
    func hundredThousandCoroutines() async {
        // In a child process, so the allocator's global counters see only this test.
        await ChildProcess.run(.success, id: "hundredThousandCoroutines") {
            // Background QoS (nice +10): the parallel tests of the parent keep the CPUs first.
            let pool = SchedulerPool(name: "stress", count: 4, qos: .background)!
            let before = StackAllocator.shared.stacksInUse
            let finished = CoroutineTestKit.Counter()
            let n = 100_000
            // Under ThreadSanitizer every live coroutine also costs a shadow-stack mapping, and
            // 100,000 at once exceed vm.max_map_count: launch them in waves there.
            let wave = TestEnvironment.heavyTestsEnabled ? n : 5_000
            let waveDone = (0..<(n / wave)).map { _ in Promise<Void>() }
            let threads = CoroutineTestKit.Log<UInt64>()
            for s in pool.schedulers {
                let tid = try await Coroutine.async(on: s) { CoroutineTestKit.threadID() }.value
                threads.append(tid)
            }
            let tids = threads.all
            let wrongThread = CoroutineTestKit.Counter()
            for w in 0..<(n / wave) {
                for i in (w * wave)..<((w + 1) * wave) {
                    let s = pool.next()
                    let expected = tids[pool.schedulers.firstIndex { $0 === s }!]
                    Coroutine.launch(on: s) {
                        if i.isMultiple(of: 3) { try Coroutine.yield() }
                        if CoroutineTestKit.threadID() != expected { wrongThread.increment() }
                        let done = finished.increment()
                        if done.isMultiple(of: wave) { waveDone[done / wave - 1].fulfill(()) }
                    }
                }
                try await waveDone[w].value
            }
            // Flush each loop: the last coroutines' stacks are given back right after they switch out.
            for s in pool.schedulers { _ = try await CoroutineTestKit.onSchedulerLoop(s) {} }
            #expect(finished.value == n, "finished \(finished.value) of \(n)")
            #expect(wrongThread.value == 0, "\(wrongThread.value) ran on a foreign thread")
            #expect(StackAllocator.shared.stacksInUse == before, "stacks in use \(StackAllocator.shared.stacksInUse), before \(before)")
            #expect(pool.schedulers.allSatisfy { $0.liveCount == 0 }, "live coroutines left")
        }
    }

    @Test("1,000,000 coroutines suspended at once on one scheduler all resume",
          .enabled(if: TestEnvironment.heavyTestsEnabled, "COROUTINES_HEAVY_TESTS=0"))
    func millionSuspended() async {
        await ChildProcess.run(.success, id: "millionSuspended") {
            // Background QoS (nice +10): the parallel tests of the parent keep the CPUs first.
            let s = CoroutineScheduler(name: "million", qos: .background)
            let n = 1_000_000
            let gate = Promise<Void>()
            let suspended = CoroutineTestKit.Counter()
            let resumed = CoroutineTestKit.Counter()
            let allSuspended = Promise<Void>()
            let allResumed = Promise<Void>()
            // Launch from the scheduler's own thread (cheaper than a million cross-thread posts).
            let launcher = Coroutine.launch(on: s, stackSize: 16 * 1024) {
                for i in 0..<n {
                    // Let the queued ones start and suspend now and then, so the run queue stays short.
                    if i.isMultiple(of: 10_000) { try Coroutine.yield() }
                    Coroutine.launch(stackSize: 16 * 1024) {
                        if suspended.increment() == n { allSuspended.fulfill(()) }
                        try gate.await()
                        if resumed.increment() == n { allResumed.fulfill(()) }
                    }
                }
            }
            try await launcher.join()
            try await allSuspended.value
            let inUse = StackAllocator.shared.stacksInUse
            let cap = StackAllocator.shared.guardedCap
            #expect(inUse >= n, "only \(inUse) stacks in use with \(n) suspended")
            #expect(cap < n, "guarded cap \(cap) not exceeded: slab stacks untested")
            gate.fulfill(())
            try await allResumed.value
            #expect(resumed.value == n, "resumed \(resumed.value) of \(n)")
            s.stop()
        }
    }

    // MARK: Stacks refused and stacks in use

    /// Guards an invariant (a coroutine that never runs borrows its scheduler and tells its
    /// unretained observers, a promise, channel or mailbox, exactly once).
    @Test("produce, actor and async whose coroutine gets no stack (address-space limit): each observer told once, with stackUnavailable",
          .enabled(if: TestEnvironment.exitTestsEnabled, "COROUTINES_EXIT_TESTS=0"))
    func neverRanWithoutStack() async {
        await ChildProcess.run(.success, id: "neverRanWithoutStack") {
            let s = CoroutineScheduler(name: "nostack")
            _ = try await Coroutine.async(on: s) { 1 }.value   // the thread and its loop are up
            let released = Kit.Counter()
            // Room for small allocations, none for a 64 MiB stack.
            var old = rlimit()
            getrlimit(Int32(RLIMIT_AS.rawValue), &old)
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmSize:") }),
                  let kb = Int(line.split(separator: " ").dropFirst().first ?? "") else { exit(30) }
            var limited = old
            limited.rlim_cur = rlim_t((kb + 32 * 1024) * 1024)
            setrlimit(Int32(RLIMIT_AS.rawValue), &limited)
            let big = 64 * 1024 * 1024
            var promises: [Promise<Int>] = []
            for i in 0..<20 {
                let t = Kit.Tracker(released)
                promises.append(Coroutine.async(on: s, stackSize: big) { _ = t; return i })
            }
            var code: Int32 = 0
            for p in promises {
                do { _ = try await p.value; code = 31 } catch CoroutineError.stackUnavailable {} catch { code = 33 }
            }
            setrlimit(Int32(RLIMIT_AS.rawValue), &old)
            if code != 0 { exit(code) }
            if released.value != 20 { exit(32) }
            s.stop()
        }
    }

    /// Guards an invariant (each scheduler publishes the counts of its stack cache).
    @Test("stacksInUse returns to its starting value once dedicated schedulers that cached stacks have stopped",
          .enabled(if: TestEnvironment.exitTestsEnabled, "COROUTINES_EXIT_TESTS=0"))
    func stacksInUseAfterStop() async {
        // In a child process, so the allocator's global counters see only this test.
        await ChildProcess.run(.success, id: "stacksInUseAfterStop") {
            let before = StackAllocator.shared.stacksInUse
            for round in 0..<5 {
                let schedulers = (0..<3).map { CoroutineScheduler(name: "stacks-\(round)-\($0)") }
                let gate = Promise<Void>()
                let all = WaitGroup()
                all.add(60)
                for i in 0..<60 {
                    Coroutine.launch(on: schedulers[i % 3]) {
                        defer { all.done() }
                        try gate.await()
                    }
                }
                // All 60 hold a stack at once.
                for s in schedulers { _ = try await Kit.onSchedulerLoop(s) {} }
                if StackAllocator.shared.stacksInUse < before + 1 { exit(10) }
                gate.fulfill(())
                try await Kit.onPlainThread { try Coroutine.runBlocking { try all.wait() } }
                // The stacks are now in the schedulers' caches: not in use.
                for s in schedulers { _ = try await Kit.onSchedulerLoop(s) {} }
                if StackAllocator.shared.stacksInUse != before { exit(11) }
                for s in schedulers { s.stop() }
                if !(await Kit.eventually { schedulers.allSatisfy(\.isStopped) }) { exit(12) }
                // Given back after the stop: still not in use (eventually: the give-back follows
                // `isStopped` on the scheduler's thread).
                if !(await Kit.eventually { StackAllocator.shared.stacksInUse == before }) { exit(13) }
            }
        }
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue, and schedulers tidy the
    /// heap after 65,536 reaped coroutines).
    @Test("stacks in use return to their starting value after repeated 111,111-coroutine fan-outs (child process)",
          .enabled(if: TestEnvironment.exitTestsEnabled && TestEnvironment.heavyTestsEnabled, "COROUTINES_EXIT_TESTS=0 or COROUTINES_HEAVY_TESTS=0"))
    func fanOutReturnsStacks() async {
        await ChildProcess.run(.success, id: "fanOutReturnsStacks") {
            let before = StackAllocator.shared.stacksInUse
            let s = CoroutineScheduler(name: "fan")
            for _ in 0..<3 {
                let sum = try await Coroutine.async(on: s) { try Kit.tree(depth: 5, fan: 10) }.value
                if sum != 111_111 { exit(10) }
                _ = try await Kit.onSchedulerLoop(s) {}
                if s.liveCount != 0 { exit(11) }
                // The scheduler's cache keeps some stacks; none is in use.
                if StackAllocator.shared.stacksInUse != before { exit(12) }
            }
            // 333,333 coroutines were reaped: the heap was tidied when the loop last went idle.
            var tidied = false
            for _ in 0..<5_000 where !tidied {
                try? await Task.sleep(for: .milliseconds(2))   // lets the loop park (no signal for that)
                let reaped = (try? await Kit.onSchedulerLoop(s) { s.reapedSinceHeapTidy }) ?? .max
                tidied = reaped < CoroutineScheduler.heapTidyInterval
            }
            if !tidied { exit(13) }
            s.stop()
            if !(await Kit.eventually { s.isStopped }) { exit(14) }
            if !(await Kit.eventually { StackAllocator.shared.stacksInUse == before }) { exit(15) }
        }
    }
}

/// Touches about `depth` × 4 KiB of the calling stack.
@inline(never)
func touchStack(_ depth: Int) -> Int {
    var page = InlineArray<4096, UInt8>(repeating: UInt8(truncatingIfNeeded: depth))
    page[CoroutineTestKit.opaque(depth) % 4096] &+= 1
    if depth == 0 { return Int(page[0]) }
    return touchStack(CoroutineTestKit.opaque(depth - 1)) &+ Int(page[4095])
}

extension StackExitTests {
    // Skipped in the ThreadSanitizer run, whose shadow memory makes RSS meaningless.
    @Test("the memory of finished coroutines' stacks goes back to the kernel once the scheduler idles",
          .enabled(if: TestEnvironment.heavyTestsEnabled, "COROUTINES_HEAVY_TESTS=0"))
    func idleStackMemoryIsReleased() async {
        await ChildProcess.run(.success, id: "idleStackMemoryIsReleased") {
            func resident() -> Int {
                let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
                return (Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0) * 4096
            }
            // Given 2,000 coroutines that each touch ~128 KiB of stack, all parked at once
            let s = CoroutineScheduler(name: "touch")
            let gate = Promise<Void>()
            let before = resident()
            let parked = CoroutineTestKit.Counter()
            let allParked = Promise<Void>()
            let coroutines = (0..<2_000).map { _ in
                Coroutine.launch(on: s) {
                    _ = touchStack(32)
                    if parked.increment() == 2_000 { allParked.fulfill(()) }
                    try gate.await()
                }
            }
            try await allParked.value
            let peak = resident()
            // When they all finish and the scheduler has nothing left to do
            gate.fulfill(())
            for c in coroutines { try await c.join() }
            // Then most of the stack memory is given back (256 stacks stay resident for reuse):
            // the loop trims right before it parks, so poll RSS for up to 5 s.
            let grown = peak - before
            var kept = resident() - before
            let deadline = ContinuousClock.now + .seconds(5)
            while kept > grown / 2 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
                kept = resident() - before
            }
            if grown < 200 * 1024 * 1024 || kept > grown / 2 {
                FileHandle.standardError.write("grown \(grown) kept \(kept)\n".data(using: .utf8)!)
                exit(1)
            }
        }
    }
}
