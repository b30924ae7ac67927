import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Pool launches and stealing: placement, order, cancellation and stopping of launches that may
/// start on any scheduler of their pool (<doc:PoolsAndStealing>).
@Suite("Pool launches and stealing", .serialized)
struct PoolStealingTests {
    /// Blocks the thread of `scheduler` (a coroutine spinning, not suspending) until the returned
    /// gate opens; returns once it is blocked.
    static func block(_ scheduler: CoroutineScheduler) async throws -> Atomic<Bool>.Gate {
        let gate = Atomic<Bool>.Gate()
        let blocked = Promise<Void>()
        Coroutine.launch(on: scheduler) {
            blocked.fulfill(())
            while !gate.isOpen { ccoro_cpu_relax() }
        }
        try await blocked.value
        return gate
    }

    @Test("a pool launch runs exactly once, on a scheduler of its pool, and its scheduler is the one it ran on")
    func poolLaunchRunsOnce() async throws {
        let pool = try #require(SchedulerPool(name: "once", count: 3))
        defer { pool.stop() }
        let runs = Kit.Tally(300)
        let handles = (0..<300).map { i in
            Coroutine.launch(on: pool) {
                runs.bump(i)
                #expect(pool.schedulers.contains { $0 === CoroutineScheduler.current })
                #expect(Coroutine.current?.scheduler === CoroutineScheduler.current)
            }
        }
        for c in handles { try await c.join() }
        #expect(runs.all == Array(repeating: 1, count: 300))
        for c in handles { #expect(pool.schedulers.contains { $0 === c.scheduler }) }
    }

    @Test("with every peer busy, children launched without on: start on their parent's scheduler, in launch order")
    func busyPeersKeepChildrenLocal() async throws {
        let pool = try #require(SchedulerPool(name: "busy-peers", count: 2))
        defer { pool.stop() }
        let gate = try await Self.block(pool.schedulers[1])
        defer { gate.open() }
        let (order, places) = try await Coroutine.async(on: pool.schedulers[0]) {
            let parent = CoroutineScheduler.current!
            let order = Kit.Log<Int>()
            let places = Kit.Log<Bool>()
            let children = (0..<100).map { i in
                Coroutine.async {
                    order.append(i)
                    places.append(CoroutineScheduler.current === parent)
                }
            }
            for c in children { try c.await() }
            return (order.all, places.all)
        }.value
        #expect(order == Array(0..<100))
        #expect(places.allSatisfy { $0 })
    }

    @Test("an idle scheduler takes unstarted launches of a blocked peer: 1,000 launches queued behind a blocked coroutine start while it is still blocked")
    func idlePeerTakesLaunchesOfBlockedScheduler() async throws {
        let pool = try #require(SchedulerPool(name: "blocked-peer", count: 2))
        defer { pool.stop() }
        let started = Kit.Counter()
        let allStarted = Promise<Void>()
        let stillBlocked = Atomic<Bool>(true)
        let startedWhileBlocked = Kit.Counter()
        let blocker = Coroutine.launch(on: pool.schedulers[0]) {
            for _ in 0..<1_000 {
                Coroutine.launch {
                    if stillBlocked.load(ordering: .acquiring) { startedWhileBlocked.increment() }
                    if started.increment() == 1_000 { allStarted.fulfill(()) }
                }
            }
            // Blocks its thread until every launch has started elsewhere (a hang would be
            // caught by the wait below).
            while started.value < 1_000 { ccoro_cpu_relax() }
            stillBlocked.store(false, ordering: .releasing)
        }
        try await allStarted.value
        try await blocker.join()
        #expect(startedWhileBlocked.value == 1_000)
    }

    @Test("cancelling a parent cancels its pool children that started on another scheduler")
    func cancelReachesStartedStolenChildren() async throws {
        let pool = try #require(SchedulerPool(name: "cancel-started", count: 2))
        defer { pool.stop() }
        let startedElsewhere = Kit.Counter()
        let allSuspended = Promise<Void>()
        let suspended = Kit.Counter()
        let children = Kit.Box<[Coroutine]>([])
        let parent = Coroutine.launch(on: pool.schedulers[0]) {
            let home = CoroutineScheduler.current!
            children.value = (0..<200).map { _ in
                Coroutine.launch {
                    if CoroutineScheduler.current !== home { startedElsewhere.increment() }
                    if suspended.increment() == 200 { allSuspended.fulfill(()) }
                    try Coroutine.delay(.seconds(60))
                }
            }
            // Keeps this scheduler busy until every child has started, so that the peer
            // takes some.
            while suspended.value < 200 { ccoro_cpu_relax() }
            try Coroutine.delay(.seconds(60))
        }
        try await allSuspended.value
        #expect(startedElsewhere.value > 0)
        parent.cancel()
        for c in children.value {
            try await c.join()
            #expect(c.error is CancellationError)
        }
        try await parent.join()
    }

    @Test("cancelling a parent cancels its pool children that have not started: their bodies never run")
    func cancelReachesUnstartedChildren() async throws {
        let pool = try #require(SchedulerPool(name: "cancel-unstarted", count: 2))
        defer { pool.stop() }
        let gate = try await Self.block(pool.schedulers[1])
        let ran = Kit.Counter()
        let launched = Promise<([Coroutine], [Promise<Int>])>()
        let parentGate = Atomic<Bool>.Gate()
        let parent = Coroutine.launch(on: pool.schedulers[0]) {
            let eager = (0..<300).map { _ in Coroutine.launch { ran.increment() } }
            let lazy = (0..<300).map { i in Coroutine.async { ran.increment(); return i } }
            launched.fulfill((eager, lazy))
            // Blocks its own scheduler too: nothing can start before the cancel.
            while !parentGate.isOpen { ccoro_cpu_relax() }
        }
        let (eager, lazy) = try await launched.value
        parent.cancel()
        parentGate.open()
        gate.open()
        for c in eager {
            try await c.join()
            #expect(c.error is CancellationError)
        }
        // Awaited, not read at once: a lazy child may still be queued on the other scheduler
        // after the last eager one finished (no order holds across a pool's schedulers).
        for p in lazy { #expect(Kit.describe(await p.valueResult) == "cancelled") }
        #expect(ran.value == 0)
        try await parent.join()
    }

    @Test("a launch onto one scheduler of a pool is never moved: it starts there, in launch order")
    func specificSchedulerKeepsFIFO() async throws {
        let pool = try #require(SchedulerPool(name: "fifo", count: 2))
        defer { pool.stop() }
        let target = pool.schedulers[0]
        let order = Kit.Log<Int>()
        let wrongPlace = Kit.Counter()
        let all = try await Kit.onPlainThread {
            (0..<500).map { i in
                Coroutine.launch(on: target) {
                    order.append(i)
                    if CoroutineScheduler.current !== target { wrongPlace.increment() }
                }
            }
        }
        for c in all { try await c.join() }
        #expect(order.all == Array(0..<500))
        #expect(wrongPlace.value == 0)
    }

    @Test("inside runBlocking, launches without on: stay on its scheduler, in launch order, and are awaited")
    func runBlockingKeepsFIFO() async throws {
        let (order, places) = try await Kit.onPlainThread {
            try Coroutine.runBlocking {
                let me = CoroutineScheduler.current!
                let order = Kit.Log<Int>()
                let places = Kit.Counter()
                for i in 0..<200 {
                    Coroutine.launch {
                        order.append(i)
                        if CoroutineScheduler.current === me { places.increment() }
                    }
                }
                return (order, places)
            }
        }
        // runBlocking returned after its launches finished.
        #expect(order.all == Array(0..<200))
        #expect(places.value == 200)
    }

    @Test("a launch without on: from a plain thread is a pool launch of the default pool")
    func plainThreadLaunchGoesToDefaultPool() async throws {
        let pool = SchedulerPool.default(for: .default)
        let ran = try await Kit.onPlainThread {
            Coroutine.async { CoroutineScheduler.current }
        }.value
        #expect(pool.schedulers.contains { $0 === ran })
    }

    @Test("a stolen coroutine is listed by dumpAll() under the scheduler that runs it")
    func dumpAllListsStolenCoroutineWhereItRuns() async throws {
        let pool = try #require(SchedulerPool(name: "dump-stolen", count: 2))
        defer { pool.stop() }
        let gate = try await Self.block(pool.schedulers[0])
        defer { gate.open() }
        // Launched from a plain thread: queued in the pool's shared queue, taken by the only
        // scheduler free.
        let suspended = Promise<Void>()
        let c = Coroutine.launch(on: pool, name: "stolen-one") {
            suspended.fulfill(())
            try Coroutine.delay(.seconds(60))
        }
        try await suspended.value
        #expect(c.scheduler === pool.schedulers[1])
        let line = Coroutine.dumpAll().split(separator: "\n").first { $0.contains("'stolen-one'") }
        #expect(line?.contains("on \(pool.schedulers[1].name):") == true)
        c.cancel()
        try await c.join()
    }

    @Test("pool.stop() cancels what has not started, ends the threads, and later pool launches finish with schedulerStopped")
    func poolStop() async throws {
        let pool = try #require(SchedulerPool(name: "stopped-pool", count: 2))
        let gate0 = try await Self.block(pool.schedulers[0])
        let gate1 = try await Self.block(pool.schedulers[1])
        let ran = Kit.Counter()
        let queued = (0..<50).map { _ in Coroutine.launch(on: pool) { ran.increment() } }
        let sleeping = Promise<Coroutine>()
        pool.stop()
        gate0.open()
        gate1.open()
        for c in queued {
            try await c.join()
            #expect(c.error is CancellationError)
        }
        #expect(ran.value == 0)
        #expect(await Kit.eventually { pool.schedulers.allSatisfy(\.isStopped) })
        let late = Coroutine.launch(on: pool) { ran.increment() }
        try await late.join()
        #expect(late.error as? CoroutineError == .schedulerStopped)
        await #expect(throws: CoroutineError.schedulerStopped) {
            try await Coroutine.async(on: pool) { ran.increment() }.value
        }
        #expect(ran.value == 0)
        _ = sleeping
    }

    @Test("stopping a scheduler cancels the pool children of its coroutines without waiting for them")
    func stopCancelsPoolChildren() async throws {
        let s = CoroutineScheduler(name: "parent-of-pool-children")
        let pool = try #require(SchedulerPool(name: "children-pool", count: 2))
        defer { pool.stop() }
        let childSuspended = Promise<Coroutine>()
        Coroutine.launch(on: s) {
            let child = Coroutine.launch(on: pool) { try Coroutine.delay(.seconds(60)) }
            childSuspended.fulfill(child)
            try Coroutine.delay(.seconds(60))
        }
        let child = try await childSuspended.value
        s.stop()
        try await child.join()
        #expect(child.error is CancellationError)
        #expect(pool.schedulers.contains { $0 === child.scheduler })
    }

    @Test("SchedulerPool(count: 40) runs launches on 40 schedulers of its own, and stops")
    func fortySchedulers() async throws {
        let pool = try #require(SchedulerPool(name: "forty", count: 40))
        #expect(pool.schedulers.count == 40)
        let sum = try await Coroutine.async(on: pool) {
            try (0..<400).map { i in Coroutine.async { i } }.reduce(0) { try $0 + $1.await() }
        }.value
        #expect(sum == (0..<400).reduce(0, +))
        pool.stop()
        #expect(await Kit.eventually { pool.schedulers.allSatisfy(\.isStopped) })
    }

    @Test("a CoroutineActor and a producer on a pool run on one of its schedulers")
    func actorAndProducerOnPool() async throws {
        let pool = try #require(SchedulerPool(name: "actor-pool", count: 2))
        defer { pool.stop() }
        let actor = CoroutineActor<Int, Int>(on: pool) { mailbox in
            for envelope in mailbox { envelope.reply(envelope.message * 2) }
        }
        #expect(try await actor.send(21).value == 42)
        #expect(pool.schedulers.contains { $0 === actor.coroutine.scheduler })
        let squares = Coroutine.produce(on: pool, capacity: 4) { out in
            for i in 1...5 { try out.send(i * i) }
        }
        let got = try await Coroutine.async(on: pool) { Array(squares) }.value
        #expect(got == [1, 4, 9, 16, 25])
        actor.cancel()
    }
}

extension Atomic where Value == Bool {
    /// A one-way flag for tests: closed until opened.
    final class Gate: Sendable {
        private let flag = Atomic<Bool>(false)
        var isOpen: Bool { flag.load(ordering: .acquiring) }
        func open() { flag.store(true, ordering: .releasing) }
    }
}
