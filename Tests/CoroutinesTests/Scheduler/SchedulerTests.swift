import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

private struct Refused: Error, Equatable { let index: Int }

/// Schedulers, their threads, stopping, and scheduler pools: see the
/// ThreadsSchedulersAndCoroutines, BlockingAndStopping and BadInputAndMisuse articles
/// (<doc:ThreadsSchedulersAndCoroutines>, <doc:BlockingAndStopping>, <doc:BadInputAndMisuse>).
@Suite("Schedulers", .serialized)
struct SchedulerTests {
    // MARK: Stopping

    @Test("stop() cancels and unwinds the coroutines suspended on the scheduler, then ends its thread")
    func stopUnwinds() async throws {
        let s = CoroutineScheduler(name: "stop-unwinds")
        let log = Kit.Log<String>()
        // Given two coroutines suspended on s.
        let sleepers = (1...2).map { i in
            Coroutine.launch(on: s) {
                defer { log.append("defer \(i)") }
                do { try Coroutine.delay(hangBound) } catch {
                    log.append("\(i) \(type(of: error))")
                    throw error
                }
            }
        }
        _ = try await Coroutine.async(on: s) {}.value   // both are suspended now
        // When s is stopped.
        s.stop()
        for c in sleepers { try await c.join() }
        // Then each was cancelled and unwound (its defer ran), and the thread ends.
        #expect(Set(log.all) == ["1 CancellationError", "defer 1", "2 CancellationError", "defer 2"])
        #expect(sleepers.allSatisfy { $0.error is CancellationError })
        #expect(await Kit.eventually { s.isStopped })
        #expect(s.liveCount == 0)
    }

    @Test("a coroutine launched onto a stopped scheduler never runs and finishes with schedulerStopped")
    func launchOntoStopped() async throws {
        let s = CoroutineScheduler(name: "stopped")
        s.stop()
        #expect(await Kit.eventually { s.isStopped })   // no signal exists for "thread ended"
        let ran = Kit.Counter()
        let c = Coroutine.launch(on: s) { ran.increment() }
        try await c.join()
        #expect(c.isFinished)
        #expect(c.error as? CoroutineError == .schedulerStopped)
        #expect(ran.value == 0)
        await #expect(throws: CoroutineError.schedulerStopped) {
            try await Coroutine.async(on: s) { ran.increment() }.value
        }
        #expect(ran.value == 0)
    }

    @Test("a coroutine launched right after stop() returns never runs")
    func launchRightAfterStop() async throws {
        // Repeated because the window between stop() and the thread's end is short.
        var ranCount = 0
        var errors: [String] = []
        for i in 0..<50 {
            let s = CoroutineScheduler(name: "stop-race-\(i)")
            _ = try await Coroutine.async(on: s) {}.value   // the loop is running
            s.stop()
            let ran = Kit.Counter()
            let c = Coroutine.launch(on: s) { ran.increment() }
            try await c.join()
            ranCount += ran.value
            if c.error as? CoroutineError != .schedulerStopped {
                errors.append(String(describing: c.error))
            }
        }
        #expect(ranCount == 0, "bodies ran on a scheduler after stop() returned")
        #expect(errors.isEmpty, "finished with \(errors) instead of schedulerStopped")
    }

    @Test("stop() is idempotent")
    func stopTwice() async throws {
        let s = CoroutineScheduler(name: "stop-twice")
        let c = Coroutine.launch(on: s) { try Coroutine.delay(hangBound) }
        s.stop()
        s.stop()
        try await c.join()
        #expect(await Kit.eventually { s.isStopped })
        s.stop()
        #expect(c.error is CancellationError)
    }

    @Test("schedulers of a pool ignore stop()")
    func poolIgnoresStop() async throws {
        let pool = try #require(SchedulerPool(name: "pool-stop", count: 1))
        let s = pool.schedulers[0]
        let sleeper = Coroutine.launch(on: s) { try Coroutine.delay(.milliseconds(30)) }
        s.stop()
        try await sleeper.join()
        #expect(sleeper.error == nil)
        #expect(try await Coroutine.async(on: s) { 7 }.value == 7)
        #expect(!s.isStopped)
    }

    /// Guards an invariant (a coroutine that never runs borrows its scheduler and tells its
    /// unretained observers, a promise, channel or mailbox, exactly once).
    @Test("produce, actor, async, launch onto a stopped scheduler, every other reference dropped at once: each observer told once, bodies released once")
    func neverRanOnStoppedScheduler() async throws {
        let s = CoroutineScheduler(name: "stopped")
        s.stop()
        #expect(await Kit.eventually { s.isStopped })
        let released = Kit.Counter()
        let ran = Kit.Counter()
        let n = 300
        var channels: [Channel<Int>] = []
        var promises: [Promise<Int>] = []
        var replies: [Promise<Int>] = []
        for i in 0..<n {
            let t1 = Kit.Tracker(released), t2 = Kit.Tracker(released), t3 = Kit.Tracker(released), t4 = Kit.Tracker(released)
            // Dropped at once: only the coroutine (briefly) keeps the channel / mailbox.
            _ = Coroutine.produce(on: s) { (out: Channel<Int>) in _ = t1; ran.increment(); try out.send(1) }
            _ = CoroutineActor<Int, Int>(on: s) { mailbox in _ = t2; ran.increment(); for e in mailbox { e.reply(e.message) } }
            _ = Coroutine.async(on: s) { () -> Int in _ = t3; ran.increment(); return i }
            Coroutine.launch(on: s) { _ = t4; ran.increment() }
            // Kept: what the observer told them.
            channels.append(Coroutine.produce(on: s) { (out: Channel<Int>) in ran.increment(); try out.send(i) })
            promises.append(Coroutine.async(on: s) { ran.increment(); return i })
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in ran.increment(); for e in mailbox { e.reply(e.message) } }
            replies.append(actor.send(i))
            #expect(actor.coroutine.isFinished)
            #expect(actor.coroutine.error is CoroutineError)
        }
        #expect(ran.value == 0)
        #expect(released.value == 4 * n, "\(released.value) of \(4 * n) bodies released")
        for ch in channels {
            #expect(ch.isClosed)
            await #expect(throws: CoroutineError.schedulerStopped) { _ = try await ch.receive() }
        }
        for p in promises { #expect(Kit.describe(p.result) == "stopped") }
        for r in replies { #expect(r.isRejected) }
    }

    /// Guards an invariant (a coroutine that never runs borrows its scheduler and tells its
    /// unretained observers, a promise, channel or mailbox, exactly once).
    @Test("children launched from a coroutine onto a stopped scheduler unlink from their parent at once (no child left in the list)")
    func childrenOnStoppedSchedulerUnlink() async throws {
        let stopped = CoroutineScheduler(name: "stopped-child")
        stopped.stop()
        #expect(await Kit.eventually { stopped.isStopped })
        let outcome = try await Kit.run { () -> [String] in
            let me = Coroutine.current!
            var log: [String] = []
            for i in 0..<200 {
                switch i % 4 {
                case 0: log.append(Kit.describe(Coroutine.async(on: stopped) { i }.result))
                case 1: log.append(Coroutine.produce(on: stopped) { (o: Channel<Int>) in try o.send(i) }.isClosed ? "closed" : "open")
                case 2: log.append(Coroutine.launch(on: stopped) {}.isFinished ? "finished" : "live")
                default: log.append(CoroutineActor<Int, Int>(on: stopped) { _ in }.coroutine.isFinished ? "finished" : "live")
                }
            }
            log.append(me.withShared { $0.firstChild == nil } ? "no children" : "children left")
            return log
        }
        #expect(outcome.last == "no children")
        #expect(Set(outcome.dropLast()) == ["stopped", "closed", "finished"], "\(Set(outcome))")
    }

    /// A regression test: `stop()` was once not handled while coroutines kept the run queue busy.
    @Test("stop() cancels coroutines that never let the run queue empty (yield loops)")
    func stopCancelsYieldLoops() async throws {
        // Given two coroutines that yield to each other forever
        let s = CoroutineScheduler(name: "busy")
        let a = Coroutine.launch(on: s) { while true { try Coroutine.yield() } }
        let b = Coroutine.launch(on: s) { while true { try Coroutine.yield() } }
        // When the scheduler is stopped
        s.stop()
        // Then both are cancelled and finish
        try await a.join()
        try await b.join()
        #expect(a.error is CancellationError)
        #expect(b.error is CancellationError)
    }

    // MARK: Threads

    @Test("a coroutine resumes on its scheduler's thread after every suspension, whoever wakes it")
    func resumesOnOwnThread() async throws {
        try await Kit.withScheduler("pinned-a") { a in
            try await Kit.withScheduler("pinned-b") { b in
                // Given 2 × 50 coroutines that each await 10 promises in turn.
                let perScheduler = 50, rounds = 10
                let n = 2 * perScheduler
                let promises = (0..<rounds).map { _ in (0..<n).map { _ in Promise<Int>() } }
                let arrived = (0..<rounds).map { _ in Kit.Counter() }
                let allArrived = (0..<rounds).map { _ in Promise<Void>() }
                let bad = Kit.Log<String>()
                let coroutines = (0..<n).map { i in
                    let s = i < perScheduler ? a : b
                    return Coroutine.launch(on: s) {
                        let tid = Kit.threadID()
                        let pthread = pthread_self()
                        for r in 0..<rounds {
                            if arrived[r].increment() == n { allArrived[r].fulfill(()) }
                            let v = try promises[r][i].await()
                            if v != r * 1000 + i { bad.append("coroutine \(i) round \(r) got \(v)") }
                            if Kit.threadID() != tid || pthread_equal(pthread_self(), pthread) == 0 {
                                bad.append("coroutine \(i) moved threads in round \(r)")
                            }
                            if CoroutineScheduler.current !== s { bad.append("coroutine \(i) lost its scheduler") }
                        }
                    }
                }
                // When, round by round, four plain threads fulfil the promises in reverse order.
                for r in 0..<rounds {
                    try await allArrived[r].value
                    try await Kit.onPlainThreads(4) { t in
                        for i in stride(from: n - 1 - t, through: 0, by: -4) { promises[r][i].fulfill(r * 1000 + i) }
                    }
                }
                for c in coroutines { try await c.join() }
                // Then every value arrived and no coroutine ever changed thread.
                #expect(bad.all.isEmpty)
                #expect(coroutines.allSatisfy { $0.error == nil })
            }
        }
    }

    @Test("each scheduler has its own thread; schedulers of different pools run on different threads")
    func distinctThreads() async throws {
        let p1 = try #require(SchedulerPool(name: "threads-p1", count: 2))
        let p2 = try #require(SchedulerPool(name: "threads-p2", count: 2))
        try await Kit.withScheduler("threads-dedicated") { d in
            var ids: [UInt64] = []
            for s in p1.schedulers + p2.schedulers + [d] {
                let first = try await Coroutine.async(on: s) { Kit.threadID() }.value
                let second = try await Coroutine.async(on: s) { Kit.threadID() }.value
                #expect(first == second, "scheduler \(s.name) used two threads")
                ids.append(first)
            }
            #expect(Set(ids).count == 5)
        }
    }

    @Test("while one coroutine waits in Coroutine.await, another on the same scheduler keeps running")
    func awaitDoesNotBlockScheduler() async throws {
        try await Kit.withScheduler("await-ticks") { s in
            let ticks = Kit.Counter()
            let waiter = Coroutine.launch(on: s) {
                try Coroutine.await { try await Task.sleep(for: .seconds(1)) }
            }
            let ticker = Coroutine.launch(on: s) {
                while !waiter.isFinished {
                    try Coroutine.delay(.milliseconds(10))
                    ticks.increment()
                }
            }
            try await waiter.join()
            try await ticker.join()
            #expect(waiter.error == nil)
            #expect(ticks.value >= 50)
        }
    }

    @Test("CoroutineScheduler.current is the driving scheduler, nil on other threads")
    func currentScheduler() async throws {
        #expect(CoroutineScheduler.current == nil)
        try await Kit.withScheduler("current-scheduler") { s in
            let inCoroutine = try await Coroutine.async(on: s) { CoroutineScheduler.current === s }.value
            let onLoop = try await Kit.onSchedulerLoop(s) { CoroutineScheduler.current === s }
            let onPlainThread = try await Kit.onPlainThread { CoroutineScheduler.current == nil }
            #expect(inCoroutine)
            #expect(onLoop)
            #expect(onPlainThread)
            #expect(s.name == "current-scheduler")
        }
    }

    @Test("liveCount counts coroutines until they finish")
    func liveCount() async throws {
        try await Kit.withScheduler("live-count") { s in
            let gate = Promise<Void>()
            let waiters = (0..<5).map { _ in Coroutine.launch(on: s) { try gate.await() } }
            let during = try await Coroutine.async(on: s) { s.liveCount }.value
            gate.fulfill(())
            for w in waiters { try await w.join() }
            let after = try await Coroutine.async(on: s) { s.liveCount }.value
            #expect(during == 6)   // five waiters and the asking coroutine
            #expect(after == 1)    // only the asking coroutine
        }
    }

    // MARK: Diagnostics

    @Test("dumpAll names a coroutine blocked in delay and says it waits in delay")
    func dumpAllNamesDelay() async throws {
        try await Kit.withScheduler("dump-scheduler") { s in
            let name = "sleepy-\(UInt32.random(in: 0...UInt32.max))"
            let c = Coroutine.launch(on: s, name: name) { try Coroutine.delay(hangBound) }
            // Launched after c on the same scheduler: runs once c has suspended.
            let dump = try await Coroutine.async(on: s) { Coroutine.dumpAll() }.value
            c.cancel()
            try await c.join()
            let line = try #require(dump.split(separator: "\n").first { $0.contains(name) })
            #expect(line.contains("delay"))
            #expect(line.contains("dump-scheduler"))
            // Gone once finished (checked after the loop released it).
            let later = try await Kit.onSchedulerLoop(s) { Coroutine.dumpAll() }
            #expect(!later.contains(name))
        }
    }

    // MARK: Pools

    @Test("SchedulerPool(count:) is nil outside 1...1024", arguments: [Int.min, -1, 0, 1025, Int.max])
    func poolCountOutOfRange(count: Int) {
        #expect(SchedulerPool(name: "bad", count: count) == nil)
    }

    @Test("SchedulerPool(count:) makes count named schedulers for counts in 1...1024", arguments: [1, 32])
    func poolCountInRange(count: Int) throws {
        let pool = try #require(SchedulerPool(name: "sized", count: count))
        #expect(pool.schedulers.count == count)
        #expect(pool.schedulers.map(\.name) == (0..<count).map { "sized.\($0)" })
        #expect(Set(pool.schedulers.map(ObjectIdentifier.init)).count == count)
    }

    @Test("default(for:) returns the same pool for a QoS class, and different pools for different classes")
    func defaultPools() {
        let classes: [DispatchQoS.QoSClass] = [.background, .utility, .default, .userInitiated, .userInteractive]
        for q in classes {
            #expect(SchedulerPool.default(for: q) === SchedulerPool.default(for: q))
            #expect((1...PoolSize.maximum).contains(SchedulerPool.default(for: q).schedulers.count))
            #expect(SchedulerPool.default(for: q).schedulers.allSatisfy { $0.qos == q })
        }
        #expect(Set(classes.map { ObjectIdentifier(SchedulerPool.default(for: $0)) }).count == classes.count)
    }

    @Test("next() hands out the schedulers round-robin")
    func roundRobin() throws {
        let pool = try #require(SchedulerPool(name: "round-robin", count: 4))
        let order = (0..<12).map { _ in pool.next() }
        let expected = (0..<12).map { pool.schedulers[$0 % 4] }
        #expect(zip(order, expected).allSatisfy { $0 === $1 })
    }

    @Test("next() from many threads gives every scheduler equally often")
    func roundRobinConcurrent() async throws {
        let pool = try #require(SchedulerPool(name: "round-robin-mt", count: 4))
        let tally = Kit.Log<Int>()
        try await Kit.onPlainThreads(4) { _ in
            var local = [Int](repeating: 0, count: 4)
            for _ in 0..<1_000 {
                let s = pool.next()
                local[pool.schedulers.firstIndex { $0 === s }!] += 1
            }
            for (i, n) in local.enumerated() { for _ in 0..<n { tally.append(i) } }
        }
        let counts = (0..<4).map { i in tally.all.count { $0 == i } }
        #expect(counts == [1_000, 1_000, 1_000, 1_000])
    }

    // MARK: Cross-thread settlement

    @Test("many coroutines on two schedulers get the right values from promises settled on plain threads")
    func promisesFromPlainThreads() async throws {
        try await Kit.withScheduler("settle-a") { a in
            try await Kit.withScheduler("settle-b") { b in
                let n = 1_000
                let promises = (0..<n).map { _ in Promise<Int>() }
                let results = (0..<n).map { i in
                    Coroutine.async(on: i.isMultiple(of: 2) ? a : b) { try promises[i].await() * 2 }
                }
                try await Kit.onPlainThreads(4) { t in
                    for i in stride(from: t, to: n, by: 4) {
                        if i.isMultiple(of: 7) { promises[i].reject(Refused(index: i)) } else { promises[i].fulfill(i) }
                    }
                }
                for (i, r) in results.enumerated() {
                    if i.isMultiple(of: 7) {
                        await #expect(throws: Refused(index: i)) { try await r.value }
                    } else {
                        let v = try await r.value
                        #expect(v == 2 * i)
                    }
                }
            }
        }
    }
}
