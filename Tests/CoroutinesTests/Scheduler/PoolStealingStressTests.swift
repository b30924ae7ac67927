import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

/// Stealing at scale: a started coroutine never changes thread while peers take unstarted
/// launches, every pool launch runs exactly once, on pools larger than the machine
/// (<doc:PoolsAndStealing>). Under ThreadSanitizer (`COROUTINES_HEAVY_TESTS=0`) the counts are
/// 10^4 coroutines.
@Suite("Pool stealing at scale", .serialized)
struct PoolStealingStressTests {
    /// Runs `coroutines` pool launches from one coroutine of `pool`, each yielding `resumes`
    /// times; every coroutine records its kernel thread id (gettid) at its start and after every
    /// resume. Returns how many changed thread (must be 0) and how many started on a scheduler
    /// other than the one that queued them (steals).
    static func runYielders(on pool: SchedulerPool, coroutines: Int, resumes: Int) async throws -> (moved: Int, stolen: Int, ran: Int) {
        let moved = Kit.Counter()
        let stolen = Kit.Counter()
        let ran = Kit.Counter()
        try await Coroutine.async(on: pool.schedulers[0]) {
            let home = CoroutineScheduler.current!
            let children = (0..<coroutines).map { _ in
                Coroutine.launch {
                    ran.increment()
                    if CoroutineScheduler.current !== home { stolen.increment() }
                    let thread = Kit.threadID()
                    for _ in 0..<resumes {
                        try Coroutine.yield()
                        if Kit.threadID() != thread { moved.increment() }
                    }
                }
            }
            for c in children { try c.join() }
        }.value
        return (moved.value, stolen.value, ran.value)
    }

    @Test("a started coroutine's thread never changes (gettid after every resume, 10^6 resumes on a 4-scheduler pool), and steals happen")
    func startedCoroutinesNeverMove() async throws {
        let pool = try #require(SchedulerPool(name: "never-move", count: 4))
        defer { pool.stop() }
        let (coroutines, resumes) = TestEnvironment.heavyTestsEnabled ? (1_000, 1_000) : (10_000, 2)
        let r = try await Self.runYielders(on: pool, coroutines: coroutines, resumes: resumes)
        #expect(r.ran == coroutines)
        #expect(r.moved == 0)
        #expect(r.stolen > 0)
    }

    @Test("10^6 pool launches each run exactly once (10^4 under ThreadSanitizer), launched from pool coroutines and from plain threads")
    func millionPoolLaunchesRunOnce() async throws {
        let pool = try #require(SchedulerPool(name: "million", count: 2))
        defer { pool.stop() }
        let n = TestEnvironment.heavyTestsEnabled ? 1_000_000 : 10_000
        let perLauncher = n / 4
        let runs = AtomicTally(n)
        defer { runs.deallocate() }
        // Two launchers inside the pool (fan-outs of `Coroutine.async` without `on:`), two on
        // plain threads.
        let inside = (0..<2).map { k in
            Coroutine.async(on: pool) {
                let base = k * perLauncher
                let ps = (0..<perLauncher).map { i in Coroutine.async { runs.bump(base + i) } }
                for p in ps { try p.await() }
            }
        }
        try await Kit.onPlainThreads(2) { k in
            let base = (2 + k) * perLauncher
            let ps = (0..<perLauncher).map { i in Coroutine.async(on: pool) { runs.bump(base + i) } }
            _ = try? Coroutine.runBlocking { for p in ps { try p.await() } }
        }
        for p in inside { try await p.value }
        let wrong = (0..<n).filter { runs[$0] != 1 }
        #expect(wrong.isEmpty, "launches that ran other than once: \(wrong.prefix(5).map { ($0, runs[$0]) })")
    }

    @Test("a 16-scheduler pool on this machine: the stealing scenario holds (no thread change, steals happen), then the pool stops")
    func sixteenSchedulerPool() async throws {
        let pool = try #require(SchedulerPool(name: "sixteen", count: 16))
        let (coroutines, resumes) = TestEnvironment.heavyTestsEnabled ? (2_000, 100) : (2_000, 2)
        let r = try await Self.runYielders(on: pool, coroutines: coroutines, resumes: resumes)
        #expect(r.ran == coroutines)
        #expect(r.moved == 0)
        #expect(r.stolen > 0)
        pool.stop()
        #expect(await Kit.eventually { pool.schedulers.allSatisfy(\.isStopped) })
    }

    @Test("cancelling parents while their pool children are being stolen: every child ends exactly once, cancelled or finished")
    func cancelWhileStealing() async throws {
        let pool = try #require(SchedulerPool(name: "cancel-steal", count: 4))
        defer { pool.stop() }
        let rounds = TestEnvironment.heavyTestsEnabled ? 200 : 20
        for _ in 0..<rounds {
            let ended = Kit.Counter()
            let bodies = Kit.Counter()
            let parent = Coroutine.launch(on: pool) {
                for _ in 0..<300 {
                    Coroutine.launch {
                        defer { ended.increment() }
                        bodies.increment()
                        try Coroutine.yield()
                        try Coroutine.yield()
                    }
                }
                try Coroutine.delay(hangBound)
            }
            Coroutine.launch(on: pool) { parent.cancel() }
            try await parent.join()
            #expect(parent.error is CancellationError)
            // Every child whose body started ran its defer once; the rest never ran.
            #expect(await Kit.eventually { ended.value == bodies.value })
        }
    }
}

extension PoolStealingStressTests {
    @Test("a scheduler that blocks right after launching 1…40 children (the stack alone holds up to 16): each starts exactly once on a peer while it stays blocked, and never changes thread", arguments: [4, 16])
    func blockedLauncherChildrenStartOnPeers(schedulers: Int) async throws {
        let pool = try #require(SchedulerPool(name: "blocked-fan-out", count: schedulers))
        defer { pool.stop() }
        let resumes = TestEnvironment.heavyTestsEnabled ? 3 : 1
        for k in 1...40 {
            let runs = Kit.Tally(k)
            let onLauncher = Kit.Counter()
            let moved = Kit.Counter()
            let finished = Kit.Counter()
            let launcher = pool.schedulers[k % schedulers]
            let allFinished = try await Coroutine.async(on: launcher) { () -> Bool in
                for i in 0..<k {
                    Coroutine.launch {
                        runs.bump(i)
                        if CoroutineScheduler.current === launcher { onLauncher.increment() }
                        let thread = Kit.threadID()
                        for _ in 0..<resumes {
                            try Coroutine.yield()
                            if Kit.threadID() != thread { moved.increment() }
                        }
                        finished.increment()
                    }
                }
                // Blocks its thread until every child has finished elsewhere; the deadline only
                // turns a hang (a launch nobody takes) into a failure.
                let deadline = ccoro_now_ns() + 30_000_000_000
                while finished.value < k {
                    if ccoro_now_ns() > deadline { return false }
                    ccoro_cpu_relax()
                }
                return true
            }.value
            #expect(allFinished, "k = \(k): \(finished.value) children finished while their launcher was blocked")
            #expect(runs.all == Array(repeating: 1, count: k), "k = \(k)")
            #expect(onLauncher.value == 0)
            #expect(moved.value == 0)
        }
    }

    @Test("many tiny fan-outs (1…40 children: launch, async, named async, launch(on: pool)) on 4- and 16-scheduler pools while peers steal from the stacks: each launch runs exactly once, each body is released once", arguments: [4, 16])
    func tinyFanOutsRunOnce(schedulers: Int) async throws {
        let pool = try #require(SchedulerPool(name: "tiny-fan-outs", count: schedulers))
        defer { pool.stop() }
        let parents = TestEnvironment.heavyTestsEnabled ? 400 : 100
        let sizes = (0..<parents).map { $0 % 40 + 1 }
        let offsets = sizes.reduce(into: [0]) { $0.append($0.last! + $1) }
        let total = offsets.last!
        let runs = AtomicTally(total)
        defer { runs.deallocate() }
        let released = Kit.Counter()
        let sums = try await Kit.onPlainThread { () -> [Promise<Int>] in
            (0..<parents).map { p in
                Coroutine.async(on: pool) { () -> Int in
                    let base = offsets[p]
                    var promises: [Promise<Int>] = []
                    var handles: [Coroutine] = []
                    for i in 0..<sizes[p] {
                        let t = Kit.Tracker(released)
                        let body: @Sendable () -> Int = { withExtendedLifetime(t) { runs.bump(base + i) }; return i }
                        switch i % 4 {
                        case 0: promises.append(Coroutine.async(body))
                        case 1: promises.append(Coroutine.async(name: "tiny-\(i)", body))
                        case 2: handles.append(Coroutine.launch { _ = body() })
                        default: handles.append(Coroutine.launch(on: pool) { _ = body() })
                        }
                    }
                    var sum = 0
                    for p in promises { sum += try p.await() }
                    for c in handles { try c.join() }
                    return sum
                }
            }
        }
        for (p, promise) in sums.enumerated() {
            let expected = (0..<sizes[p]).filter { $0 % 4 < 2 }.reduce(0, +)
            #expect(try await promise.value == expected)
        }
        let wrong = (0..<total).filter { runs[$0] != 1 }
        #expect(wrong.isEmpty, "launches that ran other than once: \(wrong.prefix(5).map { ($0, runs[$0]) })")
        #expect(await Kit.eventually { released.value == total })
    }

    @Test("cancelling parents of tiny fan-outs (1…40 children) while peers take them from the stacks: every child ends once, a body that started ran to its end or its cancellation point, promises of never-run children reject with CancellationError, each body is released once")
    func cancelTinyFanOutsWhileStealing() async throws {
        let pool = try #require(SchedulerPool(name: "cancel-tiny", count: 4))
        defer { pool.stop() }
        let released = Kit.Counter()
        var launchedChildren = 0
        for k in 1...40 {
            let started = Kit.Counter()
            let ended = Kit.Counter()
            let promises = Kit.Box<[Promise<Int>]>([])
            let parent = Coroutine.launch(on: pool) {
                let me = Coroutine.current!
                let child = { (i: Int) -> Promise<Int> in
                    let t = Kit.Tracker(released)
                    return Coroutine.async { () -> Int in
                        started.increment()
                        defer { ended.increment() }
                        try withExtendedLifetime(t) { try Coroutine.yield() }
                        return i
                    }
                }
                // The cancel is launched among the children: it races with the ones started
                // here (newest first) and the ones peers take from the stack and the ring.
                var ps = (0..<k / 2).map(child)
                Coroutine.launch { me.cancel() }
                ps += (k / 2..<k).map(child)
                promises.value = ps
                try Coroutine.delay(hangBound)
            }
            try await parent.join()
            #expect(parent.error is CancellationError)
            let children = promises.value
            #expect(children.count == k)
            launchedChildren += children.count
            var rejected = 0
            for (i, p) in children.enumerated() {
                switch await p.valueResult {
                case .success(let v): #expect(v == i)
                case .failure(let e): #expect(e is CancellationError); rejected += 1
                }
            }
            #expect(ended.value == started.value)
            #expect(rejected >= children.count - started.value)
        }
        #expect(await Kit.eventually { released.value == launchedChildren })
    }
}

/// Per-index run counts bumped from many threads without a lock (a `Mutex` per bump made a
/// million launches spend most of their time in the lock).
private final class AtomicTally: @unchecked Sendable {
    private let counts: UnsafeMutablePointer<Atomic<Int>>
    private let n: Int
    init(_ n: Int) {
        self.n = n
        counts = .allocate(capacity: n)
        for i in 0..<n { (counts + i).initialize(to: Atomic(0)) }
    }
    func bump(_ i: Int) { counts[i].wrappingAdd(1, ordering: .relaxed) }
    subscript(i: Int) -> Int { counts[i].load(ordering: .relaxed) }
    func deallocate() {
        counts.deinitialize(count: n)
        counts.deallocate()
    }
}
