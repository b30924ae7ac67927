import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

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

    @Test("with every peer busy, children launched without on: start on their parent's scheduler, the 16 newest first (newest first), then the rest in launch order")
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
        // <doc:PoolsAndStealing>, Order: the stack of the 16 newest launches, then the ring.
        #expect(order == Array((84..<100).reversed()) + Array(0..<84))
        #expect(places.count == 100 && places.allSatisfy { $0 })
    }

    @Test("a coroutine that yields until its children have run does not starve them: with no free peer, every 61st turn starts one of the launches in its scheduler's stack", arguments: [1, 16, 40])
    func yieldingParentDoesNotStarveStackedLaunches(children: Int) async throws {
        // One scheduler: nobody can steal, the scheduler's own turns must start them.
        let pool = try #require(SchedulerPool(name: "yield-no-starve", count: 1))
        defer { pool.stop() }
        let ran = Kit.Counter()
        let (turns, started) = try await Coroutine.async(on: pool) {
            for _ in 0..<children { Coroutine.launch { ran.increment() } }
            // The run queue never empties while this loops: only the launch turn (every 61st)
            // can start the children. Bounded, so that a starvation fails instead of hanging.
            var turns = 0
            while ran.value < children && turns < 100_000 {
                try Coroutine.yield()
                turns += 1
            }
            return (turns, ran.value)
        }.value
        #expect(started == children)
        // <doc:PoolsAndStealing>, Order: "every 61st turn takes an unstarted launch first".
        #expect(turns <= Int(CoroutineScheduler.launchTurnInterval) * (children + 1))
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

    @Test("once a peer has taken every launch of a blocked scheduler's stack, the pool has no launches to take and the idle peer parks")
    func peerParksOnceBlockedSchedulersStackIsEmptied() async throws {
        let pool = try #require(SchedulerPool(name: "emptied-stack", count: 2))
        defer { pool.stop() }
        let owner = pool.schedulers[0], thief = pool.schedulers[1]
        let ran = Kit.Counter()
        let allRan = Promise<Void>()
        let gate = Atomic<Bool>.Gate()
        defer { gate.open() }
        Coroutine.launch(on: owner) {
            // Fewer than 16: only the stack holds them, and the thief takes them one by one.
            for _ in 0..<3 { Coroutine.launch { if ran.increment() == 3 { allRan.fulfill(()) } } }
            while !gate.isOpen { ccoro_cpu_relax() }
        }
        try await allRan.value
        // The owner is still blocked: nobody but the thief touched its stack since.
        #expect(owner.launchQueue?.isEmpty == true)
        #expect(!pool.hasLaunchesToTake(besides: thief))
        // Nothing left to take: the thief stops looking and parks (a hang here is a thief
        // spinning on the stale count of the blocked scheduler's stack).
        #expect(await Kit.eventually { thief.lifecycle.load().isParked })
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
                    try Coroutine.delay(hangBound)
                }
            }
            // Keeps this scheduler busy until every child has started, so that the peer
            // takes some.
            while suspended.value < 200 { ccoro_cpu_relax() }
            try Coroutine.delay(hangBound)
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
        // Settled when their never-run coroutines end, possibly after the eager ones: awaited
        // before they are looked at (`result` is nil until then).
        for p in lazy { await #expect(throws: CancellationError.self) { try await p.value } }
        #expect(ran.value == 0)
        try await parent.join()
    }

    @Test("cancelling a parent while its children sit in its blocked scheduler's stack: the peer that takes them starts them cancelled, no body runs, promises reject with CancellationError, each body is released once")
    func cancelledStackedChildrenStolenByPeerNeverRun() async throws {
        let pool = try #require(SchedulerPool(name: "cancel-stacked", count: 2))
        defer { pool.stop() }
        let owner = pool.schedulers[0], thief = pool.schedulers[1]
        let thiefGate = try await Self.block(thief)
        let ownerGate = Atomic<Bool>.Gate()
        defer { ownerGate.open(); thiefGate.open() }
        let ran = Kit.Counter()
        let released = Kit.Counter()
        let handles = Kit.Box<([Coroutine], [Promise<Int>])>(([], []))
        let launched = Promise<Void>()
        let parent = Coroutine.launch(on: owner) {
            // 4 + 4 + 4 launches: fewer than 16, the stack alone holds them.
            let eager = (0..<4).map { _ in
                let t = Kit.Tracker(released)
                return Coroutine.launch { withExtendedLifetime(t) { _ = ran.increment() } }
            }
            let lazy = (0..<4).map { i in
                let t = Kit.Tracker(released)
                return Coroutine.async { () -> Int in withExtendedLifetime(t) { _ = ran.increment() }; return i }
            }
            let named = (0..<4).map { i in
                let t = Kit.Tracker(released)
                return Coroutine.async(name: "named-\(i)") { () -> Int in withExtendedLifetime(t) { _ = ran.increment() }; return i }
            }
            handles.value = (eager, lazy + named)
            launched.fulfill(())
            while !ownerGate.isOpen { ccoro_cpu_relax() }
        }
        try await launched.value
        parent.cancel()
        // The owner stays blocked: only the peer can take them, from the owner's stack.
        thiefGate.open()
        let (eager, promises) = handles.value
        for c in eager {
            try await c.join()
            #expect(c.error is CancellationError)
            #expect(c.scheduler === thief)
        }
        for p in promises {
            await #expect(throws: CancellationError.self) { try await p.value }
        }
        #expect(ran.value == 0)
        #expect(await Kit.eventually { released.value == 12 })
        ownerGate.open()
        try await parent.join()
        #expect(ran.value == 0)
    }

    @Test("a child cancelled through its handle while it sits in its launcher's stack never runs its body, whether its own scheduler or a peer takes it", arguments: [false, true])
    func handleCancelledInStackNeverRuns(stolen: Bool) async throws {
        let pool = try #require(SchedulerPool(name: "cancel-handle-stacked", count: 2))
        defer { pool.stop() }
        let owner = pool.schedulers[0], thief = pool.schedulers[1]
        let thiefGate = try await Self.block(thief)
        defer { thiefGate.open() }
        let ran = Kit.Counter()
        let (child, sibling) = try await Coroutine.async(on: owner) { () -> (Coroutine, Promise<Int>) in
            let child = Coroutine.launch { ran.increment() }
            let sibling = Coroutine.async(name: "sibling") { () -> Int in ran.increment(); return 1 }
            child.cancel()
            sibling.cancel()
            if stolen {
                // Blocks the owner until the peer has taken both (and finished them).
                thiefGate.open()
                while !child.isFinished || sibling.result == nil { ccoro_cpu_relax() }
            }
            return (child, sibling)
        }.value
        try await child.join()
        #expect(child.error is CancellationError)
        await #expect(throws: CancellationError.self) { try await sibling.value }
        #expect(child.scheduler === (stolen ? thief : owner))
        #expect(ran.value == 0)
    }

    @Test("pool.stop() with launches in the stacks and rings of blocked schedulers: none runs, each finishes with CancellationError, every body, child and parent is released once, later launches finish with schedulerStopped", arguments: [4, 14])
    func stopWithStackedLaunches(perKind: Int) async throws {
        let pool = try #require(SchedulerPool(name: "stop-stacked", count: 2))
        let ran = Kit.Counter()
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let handles = Kit.Box<([Coroutine], [Promise<Int>])>(([], []))
        let launched = Promise<Void>()
        let thiefGate = try await Self.block(pool.schedulers[1])
        let ownerGate = Atomic<Bool>.Gate()
        var parent: Coroutine? = Coroutine.launch(on: pool.schedulers[0]) {
            // 3 × perKind launches: 12 fit the stack; 42 overflow into the ring.
            let eager = (0..<perKind).map { _ in
                let t = Kit.Tracker(released)
                return Coroutine.launch { withExtendedLifetime(t) { _ = ran.increment() } }
            }
            let lazy = (0..<perKind).map { i in
                let t = Kit.Tracker(released)
                return Coroutine.async { () -> Int in withExtendedLifetime(t) { _ = ran.increment() }; return i }
            }
            let named = (0..<perKind).map { i in
                let t = Kit.Tracker(released)
                return Coroutine.async(name: "named-\(i)") { () -> Int in withExtendedLifetime(t) { _ = ran.increment() }; return i }
            }
            handles.value = (eager, lazy + named)
            launched.fulfill(())
            while !ownerGate.isOpen { ccoro_cpu_relax() }
        }
        weak.add(parent!)
        try await launched.value
        pool.stop()
        ownerGate.open()
        thiefGate.open()
        do {
            let (eager, promises) = handles.value
            handles.value = ([], [])
            for c in eager {
                weak.add(c)
                try await c.join()
                #expect(c.error is CancellationError)
            }
            for p in promises {
                await #expect(throws: CancellationError.self) { try await p.value }
            }
        }
        #expect(ran.value == 0)
        try await parent?.join()
        parent = nil
        #expect(await Kit.eventually { pool.schedulers.allSatisfy(\.isStopped) })
        #expect(await Kit.eventually { released.value == 3 * perKind })
        #expect(await Kit.eventually { weak.alive == 0 }, "coroutines still alive: \(weak.alive) of \(weak.count)")
        let late = try await Kit.onPlainThread { Coroutine.launch(on: pool) { ran.increment() } }
        try await late.join()
        #expect(late.error as? CoroutineError == .schedulerStopped)
        #expect(ran.value == 0)
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
            try Coroutine.delay(hangBound)
        }
        try await suspended.value
        #expect(c.scheduler === pool.schedulers[1])
        let line = Coroutine.dumpAll().split(separator: "\n").first { $0.contains("'stolen-one'") }
        #expect(line?.contains("on \(pool.schedulers[1].name):") == true)
        c.cancel()
        try await c.join()
    }

    @Test("a launch in a scheduler's stack: its scheduler is that scheduler and dumpAll() lists it there as ready (not started); stolen by a peer, both name the peer")
    func stackedLaunchPlacementAndDump() async throws {
        let pool = try #require(SchedulerPool(name: "dump-stacked", count: 2))
        defer { pool.stop() }
        let owner = pool.schedulers[0], thief = pool.schedulers[1]
        let thiefGate = try await Self.block(thief)
        defer { thiefGate.open() }
        let ownerGate = Atomic<Bool>.Gate()
        defer { ownerGate.open() }
        let launched = Promise<Coroutine>()
        let ranOn = Promise<CoroutineScheduler>()
        let lazy = Kit.Box<[Promise<Int>]>([])
        Coroutine.launch(on: owner) {
            // A named launch (created now) and two lazy ones: the stack holds all three.
            let c = Coroutine.launch(name: "stacked-child") {
                ranOn.fulfill(CoroutineScheduler.current!)
                try Coroutine.delay(hangBound)
            }
            lazy.value = (0..<2).map { i in Coroutine.async { i } }
            launched.fulfill(c)
            while !ownerGate.isOpen { ccoro_cpu_relax() }
        }
        let child = try await launched.value
        // Both schedulers are blocked: nothing can take the launches.
        #expect(child.scheduler === owner)
        let waiting = Coroutine.dumpAll().split(separator: "\n")
            .filter { $0.contains(" on \(owner.name): ready (not started)") }
        #expect(waiting.count == 3, "\(Coroutine.dumpAll())")
        // The owner stays blocked; the freed peer takes the launches from its stack.
        thiefGate.open()
        #expect(try await ranOn.value === thief)
        for p in lazy.value { _ = try await p.value }
        #expect(child.scheduler === thief)
        #expect(Coroutine.dumpAll().split(separator: "\n").contains {
            $0.contains("'stacked-child' on \(thief.name):")
        })
        child.cancel()
        try await child.join()
        #expect(child.error is CancellationError)
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
            let child = Coroutine.launch(on: pool) { try Coroutine.delay(hangBound) }
            childSuspended.fulfill(child)
            try Coroutine.delay(hangBound)
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
