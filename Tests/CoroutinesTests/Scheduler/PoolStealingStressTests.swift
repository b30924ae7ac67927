import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines

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
        let (coroutines, resumes) = Kit.heavyTestsEnabled ? (1_000, 1_000) : (10_000, 2)
        let r = try await Self.runYielders(on: pool, coroutines: coroutines, resumes: resumes)
        #expect(r.ran == coroutines)
        #expect(r.moved == 0)
        #expect(r.stolen > 0)
    }

    @Test("10^6 pool launches each run exactly once (10^4 under ThreadSanitizer), launched from pool coroutines and from plain threads")
    func millionPoolLaunchesRunOnce() async throws {
        let pool = try #require(SchedulerPool(name: "million", count: 2))
        defer { pool.stop() }
        let n = Kit.heavyTestsEnabled ? 1_000_000 : 10_000
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
        let (coroutines, resumes) = Kit.heavyTestsEnabled ? (2_000, 100) : (2_000, 2)
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
        let rounds = Kit.heavyTestsEnabled ? 200 : 20
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
                try Coroutine.delay(.seconds(60))
            }
            Coroutine.launch(on: pool) { parent.cancel() }
            try await parent.join()
            #expect(parent.error is CancellationError)
            // Every child whose body started ran its defer once; the rest never ran.
            #expect(await Kit.eventually { ended.value == bodies.value })
        }
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
