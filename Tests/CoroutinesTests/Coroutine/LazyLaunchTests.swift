import Foundation
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias Boom = CoroutineTestKit.Boom

/// `Coroutine.async` from a coroutine onto its own scheduler queues a `PendingLaunch`: the
/// coroutine object is created when the launch reaches the head of the run queue. Everything a
/// user can see must be as if it had been created at launch: start order, cancellation by the
/// promise and by the parent, stop, `dumpAll`, lifetimes. Tests with an `eager` argument run the
/// same call with a `name:` too (`Kit.spawn`), which is never lazy, and expect the same.
@Suite("Coroutine.async from a coroutine: created when it first runs", .serialized)
struct LazyLaunchTests {
    @Test("pending launches, launch and a yielding coroutine run in the order they were queued (fresh scheduler: no cached stack for the direct switch)")
    func startOrder() async throws {
        try await Kit.withScheduler("lazy-order") { s in
            let log = Kit.Log<String>()
            try await Coroutine.async(on: s) { () throws -> Void in
                let a = Coroutine.async { log.append("a"); return 1 }
                Coroutine.launch { log.append("b") }
                let c = Coroutine.async(on: s) { log.append("c"); return 3 }   // explicitly the same scheduler
                log.append("queued")
                try Coroutine.yield()   // behind a, b and c
                log.append("me")
                #expect(try a.await() + c.await() == 4)
            }.value
            #expect(log.all == ["queued", "a", "b", "c", "me"])
        }
    }

    @Test("a promise cancelled before its coroutine exists: the body never runs, is released once, the promise says cancelled")
    func promiseCancelledBeforeStart() async throws {
        let ran = Kit.Counter()
        let released = Kit.Counter()
        try await Kit.withScheduler("lazy-cancel-before-start") { s in try await Coroutine.async(on: s) { () throws -> Void in
            var promises: [Promise<Int>] = []
            for i in 0..<50 {
                let tracker = Kit.Tracker(released)
                let p = Coroutine.async { () -> Int in
                    withExtendedLifetime(tracker) {}
                    ran.increment()
                    return i
                }
                if i % 2 == 0 { p.cancel() }
                promises.append(p)
            }
            let line = "unnamed on lazy-cancel-before-start: ready (not started)"
            #expect(Coroutine.dumpAll().split(separator: "\n").filter { $0 == line }.count == 50)
            for (i, p) in promises.enumerated() {
                if i % 2 == 0 {
                    #expect(throws: CancellationError.self) { try p.await() }
                } else {
                    #expect(try p.await() == i)
                }
            }
        }.value }
        #expect(ran.value == 25)
        #expect(released.value == 50)
    }

    @Test("cancelling the parent before its Coroutine.async children start: none runs, each promise is rejected with CancellationError")
    func parentCancelledBeforeChildrenStart() async throws {
        let ran = Kit.Counter()
        try await Kit.run { () throws -> Void in
            let children = try Coroutine.async { () -> [Promise<Int>] in
                let ps = (0..<5).map { i in Coroutine.async { () -> Int in ran.increment(); return i } }
                Coroutine.current?.cancel()   // before any child has its coroutine
                return ps
            }.await()
            for p in children {
                #expect(throws: CancellationError.self) { try p.await() }
            }
        }
        #expect(ran.value == 0)
    }

    @Test("a parent that finished before its children start: they run and settle, and every coroutine is freed afterwards")
    func parentFinishedBeforeChildrenStart() async throws {
        let weak = Kit.WeakCoroutines()
        try await Kit.run { () throws -> Void in
            let children = try Coroutine.async { () -> [Promise<Int>] in
                if let c = Coroutine.current { weak.add(c) }
                return (0..<3).map { i in
                    Coroutine.async { () -> Int in
                        if let c = Coroutine.current { weak.add(c) }
                        return i * 2
                    }
                }
            }.await()
            #expect(try children.map { try $0.await() } == [0, 2, 4])
        }
        #expect(weak.count == 4)
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines still alive")
    }

    @Test("cancelling a parent cancels a Coroutine.async child suspended after it started")
    func parentCancelReachesStartedChild() async throws {
        try await Kit.withScheduler("lazy-cancel") { s in
            let started = Promise<Void>()
            let child = Kit.Box<Promise<Int>?>(nil)
            let parent = Coroutine.launch(on: s) {
                let p = Coroutine.async { () throws -> Int in
                    started.fulfill(())
                    try Coroutine.delay(hangBound)
                    return 1
                }
                child.value = p
                _ = try? p.await()
            }
            try await started.value
            parent.cancel()
            try await parent.join()
            // The parent's own await ends with its cancellation; the child's ends with its own.
            let p = try #require(child.value)
            // Not reached by the cancellation, it would sleep 60 s: the timeout makes that a failure.
            await #expect(throws: CancellationError.self) { try await p.timeout(hangBound).value }
        }
    }

    @Test("a stop while Coroutine.async launches are queued: every promise settles, every body is released, nothing stays alive")
    func stopWithQueuedLaunches() async throws {
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let s = CoroutineScheduler(name: "lazy-stop")
        let promises = Kit.Box<[Promise<Int>]>([])
        let queued = Promise<Void>()
        Coroutine.launch(on: s) {
            if let c = Coroutine.current { weak.add(c) }
            var ps: [Promise<Int>] = []
            for i in 0..<1000 {
                let tracker = Kit.Tracker(released)
                ps.append(Coroutine.async { () throws -> Int in
                    withExtendedLifetime(tracker) {}
                    if let c = Coroutine.current { weak.add(c) }
                    try Coroutine.yield()
                    return i
                })
            }
            promises.value = ps
            s.stop()
            // Refused by the stopping scheduler: launched the usual way, finished as stopped.
            ps.append(Coroutine.async { 0 })
            promises.value = ps
            queued.fulfill(())
        }
        try await queued.value
        #expect(await Kit.eventually { s.isStopped })
        let all = promises.value
        #expect(all.count == 1001)
        var outcomes: [String: Int] = [:]
        for (i, p) in all.enumerated() {
            switch p.result {
            case nil: outcomes["pending", default: 0] += 1
            case .success(let v): outcomes[v == i ? "value" : "wrong value", default: 0] += 1
            case .failure(let e) where e is CancellationError: outcomes["cancelled", default: 0] += 1
            case .failure(CoroutineError.schedulerStopped): outcomes["stopped", default: 0] += 1
            case .failure(let e): outcomes["\(e)", default: 0] += 1
            }
        }
        #expect(Set(outcomes.keys).isSubset(of: ["value", "cancelled", "stopped"]), "\(outcomes)")
        #expect(all.last?.result.map { if case .failure(CoroutineError.schedulerStopped) = $0 { true } else { false } } == true)
        #expect(released.value == 1000)
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines still alive")
    }

    @Test("dumpAll lists each launch not started yet, and no longer once they ran")
    func dumpAllCountsPendingLaunches() async throws {
        try await Kit.withScheduler("lazy-dump") { s in
            let (before, after) = try await Coroutine.async(on: s) { () throws -> (String, String) in
                let ps = (0..<3).map { i in Coroutine.async { i } }
                let before = Coroutine.dumpAll()
                for p in ps { _ = try p.await() }
                return (before, Coroutine.dumpAll())
            }.value
            let line = "unnamed on lazy-dump: ready (not started)"
            #expect(before.split(separator: "\n").filter { $0 == line }.count == 3, "\(before)")
            #expect(!after.contains(line), "\(after)")
        }
    }

    // MARK: Cancellation of everything on the scheduler

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("runBlocking's body throws: a Coroutine.async queued by a coroutine that already finished is cancelled, as one created at launch is",
          arguments: [false, true])
    func bodyThrowsCancelsLaunchOfFinishedParent(eager: Bool) async throws {
        let ran = Kit.Counter()
        let child = Kit.Box<Promise<Int>?>(nil)
        let thrown = try await Kit.onPlainThread { () -> String in
            do {
                try Coroutine.runBlocking { () throws -> Void in
                    // The launcher queues the child and finishes before the body throws.
                    Coroutine.launch {
                        child.value = Kit.spawn(eager: eager) { ran.increment(); return 1 }
                    }
                    try Coroutine.yield()
                    throw Boom()
                }
                return "returned"
            } catch {
                return "\(type(of: error))"
            }
        }
        #expect(thrown == "Boom")
        // The BlockingAndStopping article (<doc:BlockingAndStopping>): if the body throws, every
        // coroutine still on that scheduler is cancelled.
        #expect(ran.value == 0, "the child's body ran after runBlocking's body threw")
        #expect(Kit.describe(try #require(child.value).result) == "cancelled")
    }

    // MARK: Settlement by something other than cancel()

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("fulfilling or rejecting a Coroutine.async promise before its coroutine starts does not skip the body (only cancel() does)",
          arguments: [false, true])
    func externalSettlementDoesNotCancel(eager: Bool) async throws {
        let ran = Kit.Log<String>()
        let results = try await Kit.run { () throws -> [String] in
            let a = Kit.spawn(eager: eager) { () -> Int in ran.append("a"); return 1 }
            let b = Kit.spawn(eager: eager) { () -> Int in ran.append("b"); return 2 }
            let c = Kit.spawn(eager: eager) { () -> Int in ran.append("c"); return 3 }
            a.fulfill(10)
            b.reject(Boom())
            c.cancel()
            try Coroutine.yield()   // behind a, b and c
            return [a, b, c].map { Kit.describe($0.result) }
        }
        #expect(results == ["value 10", "boom Boom()", "cancelled"])
        #expect(ran.all == ["a", "b"], "bodies that ran: \(ran.all)")
    }

    // MARK: Stop

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("stop() from inside a coroutine that keeps launching Coroutine.async children after it: later ones finish as stopped, none runs")
    func stopFromInsideThenKeepLaunching() async throws {
        let s = CoroutineScheduler(name: "stop-inside")
        let ranAfterStop = Kit.Counter()
        let released = Kit.Counter()
        let after = Kit.Box<[Promise<Int>]>([])
        let done = Promise<Void>()
        Coroutine.launch(on: s) {
            defer { done.fulfill(()) }
            for _ in 0..<100 { _ = Coroutine.async { 0 } }
            s.stop()
            var ps: [Promise<Int>] = []
            for i in 0..<500 {
                let tracker = Kit.Tracker(released)
                ps.append(Coroutine.async { withExtendedLifetime(tracker) {}; ranAfterStop.increment(); return i })
            }
            after.value = ps
        }
        try await done.value
        #expect(await Kit.eventually { s.isStopped })
        #expect(ranAfterStop.value == 0)
        #expect(after.value.allSatisfy { Kit.describe($0.result) == "stopped" })
        #expect(released.value == 500)
    }

    // MARK: Start order

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("start order is FIFO across a woken coroutine, Coroutine.async (implicit and explicit scheduler), launch and a yielding child")
    func fifoAcrossWokenAsyncAndLaunch() async throws {
        try await Kit.withScheduler("fifo") { s in
            let log = Kit.Log<String>()
            try await Coroutine.async(on: s) { () throws -> Void in
                let gate = Promise<Void>()
                Coroutine.launch { try? gate.await(); log.append("woken") }
                try Coroutine.yield()           // the launched coroutine now waits on the gate
                gate.fulfill(())                // ready: queued before everything below
                let a = Coroutine.async { log.append("a1"); return 1 }
                Coroutine.launch { log.append("l2") }
                let b = Coroutine.async(on: s) { log.append("a3"); return 3 }
                let c = Coroutine.async { () throws -> Int in
                    log.append("a4")
                    try Coroutine.yield()
                    log.append("a4'")
                    return 4
                }
                let d = Coroutine.async { log.append("a5"); return 5 }
                log.append("queued")
                _ = try a.await()               // woken by a1: queued behind a5
                log.append("me")
                #expect(try b.await() + c.await() + d.await() == 12)
            }.value
            #expect(log.all == ["queued", "woken", "a1", "l2", "a3", "a4", "a5", "me", "a4'"], "\(log.all)")
        }
    }

    // MARK: Where Coroutine.async can be called from

    /// Launches a `Coroutine.async` from its deinit; the promise lands in `box`.
    private final class Spawner: Sendable {
        let box: Kit.Box<Promise<Int>?>
        let ran: Kit.Counter
        init(_ box: Kit.Box<Promise<Int>?>, _ ran: Kit.Counter) { self.box = box; self.ran = ran }
        deinit {
            let ran = self.ran
            box.value = Coroutine.async { ran.increment(); return 7 }
        }
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("Coroutine.async from deinits of a body's captures and locals, released as a coroutine ends: it runs and Coroutine.run waits for it")
    func asyncFromDeinitAtFinish() async throws {
        let ran = Kit.Counter()
        let fromLocal = Kit.Box<Promise<Int>?>(nil)
        let fromCapture = Kit.Box<Promise<Int>?>(nil)
        let fromAsyncBody = Kit.Box<Promise<Int>?>(nil)
        try await Kit.run { () throws -> Void in
            Coroutine.launch { _ = Spawner(fromLocal, ran) }
            let captured = Spawner(fromCapture, ran)
            Coroutine.launch { withExtendedLifetime(captured) {} }
            let inAsync = Spawner(fromAsyncBody, ran)
            _ = Coroutine.async { withExtendedLifetime(inAsync) {}; return 0 }
        }
        // Coroutine.run returned: everything launched onto its scheduler has finished.
        #expect(ran.value == 3)
        for box in [fromLocal, fromCapture, fromAsyncBody] {
            #expect(Kit.describe(try #require(box.value).result) == "value 7")
        }
    }

    /// Its deinit launches a `Coroutine.async` (result into `box`).
    private final class SpawningError: Error, @unchecked Sendable {
        let box: Kit.Box<Promise<Int>?>
        init(_ box: Kit.Box<Promise<Int>?>) { self.box = box }
        deinit { box.value = Coroutine.async { 9 } }
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("a cancelled parent kept alive only by its pending child's launch: its error's deinit runs during materialization and launches again")
    func parentReleasedDuringMaterialization() async throws {
        let spawned = Kit.Box<Promise<Int>?>(nil)
        let child = Kit.Box<Promise<Int>?>(nil)
        let ran = Kit.Counter()
        try await Kit.run { () throws -> Void in
            do {
                _ = Coroutine.async { () throws -> Int in
                    child.value = Coroutine.async { ran.increment(); return 1 }
                    Coroutine.current?.cancel()
                    throw SpawningError(spawned)
                }
            }
            try Coroutine.yield()   // the parent runs, queues the child, throws and is reaped
            try Coroutine.yield()   // the child is created (direct switch), the parent released
            try Coroutine.yield()
        }
        #expect(ran.value == 0)
        #expect(Kit.describe(try #require(child.value).result) == "cancelled")
        #expect(Kit.describe(try #require(spawned.value).result) == "value 9")
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("Coroutine.async from a generator body hosted by a coroutine: FIFO with launches, values delivered, a cancelled host cancels them")
    func asyncFromGeneratorBody() async throws {
        let log = Kit.Log<String>()
        let values = try await Kit.run { () throws -> [Int] in
            let g = Generator<Promise<Int>> { yield in
                for i in 0..<3 {
                    try yield(Coroutine.async { log.append("a\(i)"); return i * 10 })
                    Coroutine.launch { log.append("l\(i)") }
                }
            }
            let ps = Array(g)
            return try ps.map { try $0.await() }
        }
        #expect(values == [0, 10, 20])
        #expect(log.all == ["a0", "l0", "a1", "l1", "a2", "l2"], "\(log.all)")

        let ran = Kit.Counter()
        let cancelled = try await Kit.run { () throws -> [String] in
            let host = Coroutine.async { () throws -> [Promise<Int>] in
                let g = Generator<Promise<Int>> { yield in
                    for i in 0..<3 { try yield(Coroutine.async { ran.increment(); return i }) }
                }
                let ps = Array(g)
                Coroutine.current?.cancel()
                return ps
            }
            let ps = try host.await()
            for p in ps { _ = try? p.await() }
            return ps.map { Kit.describe($0.result) }
        }
        #expect(ran.value == 0)
        #expect(cancelled == ["cancelled", "cancelled", "cancelled"])
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("Coroutine.async inside an actor body, a produce() body, withTimeout and a select handler")
    func asyncFromActorProduceTimeoutSelect() async throws {
        try await Kit.run { () throws -> Void in
            // Actor.
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    let m = envelope.message
                    envelope.reply(try Coroutine.async { m * 2 }.await())
                }
            }
            defer { actor.cancel() }
            let replies = (0..<20).map { actor.send($0) }
            #expect(try replies.map { try $0.await() } == (0..<20).map { $0 * 2 })

            // produce().
            let ch: Channel<Int> = Coroutine.produce(capacity: 1) { out in
                for i in 0..<10 { try out.send(try Coroutine.async { i + 100 }.await()) }
            }
            #expect(Array(ch) == Array(100..<110))

            // withTimeout: the timeout reaches the waiting coroutine, not the child.
            let gate = Promise<Void>()
            let inner = Kit.Box<Promise<Int>?>(nil)
            #expect(throws: CoroutineError.timedOut) {
                try Coroutine.withTimeout(.milliseconds(20)) {
                    let p = Coroutine.async { () throws -> Int in try gate.await(); return 5 }
                    inner.value = p
                    return try p.await()
                }
            }
            gate.fulfill(())
            #expect(try #require(inner.value).await() == 5)
            // A zero time limit: launching does not suspend, so it returns the promise.
            let quick = try Coroutine.withTimeout(.zero) { Coroutine.async { 6 } }
            #expect(try quick.await() == 6)

            // select: the chosen handler launches.
            let sel = Channel<Int>(capacity: 1)
            try sel.send(3)
            let chosen: Promise<Int> = try select { s in
                s.receive(from: sel) { v in Coroutine.async { (v ?? 0) * 3 } }
                s.timeout(after: hangBound) { Coroutine.async { -1 } }
            }
            #expect(try chosen.await() == 9)
        }
    }

    // MARK: The pending-launch ring

    /// Pending launches keep their bodies in a ring of their own (`PendingLaunchQueue`).
    @Test("PendingLaunchQueue: growth across a wrapped head keeps FIFO; deallocate() with launches queued releases every body and parent reference once and never touches the observers")
    func ringGrowthAndDeallocate() async throws {
        try await Kit.withScheduler("pending-launch-ring") { s in
            let released = Kit.Counter()
            final class Parent: @unchecked Sendable { weak var c: Coroutine? }
            let weakParent = Parent()
            let order = Kit.Log<Int>()
            let observers = (0..<4).map { _ in Promise<Int>() }
            do {
                let parent = Coroutine(scheduler: s, name: "ring-parent", stackSize: nil, reportsUnobservedErrors: false,
                                       unstartedObserver: nil, body: {})
                weakParent.c = parent
                var q = PendingLaunchQueue(capacity: 8)
                var next = 0
                func push(_ k: Int) {
                    for _ in 0..<k {
                        let i = next
                        next += 1
                        let tracker = Kit.Tracker(released)
                        q.append(PendingLaunch(observer: observers[i % 4], parent: Unmanaged.passUnretained(parent).retain(),
                                               cancelAllCount: i),
                                 body: { withExtendedLifetime(tracker) {}; order.append(i) })
                    }
                }
                func pop(_ k: Int) throws {
                    for _ in 0..<k {
                        let (launch, body) = q.popFirst()
                        #expect(launch.observer === observers[launch.cancelAllCount % 4])
                        launch.parent.release()
                        try body()
                    }
                }
                push(6); try pop(5)          // head at 5 of 8
                push(7)                      // 8 queued, wrapping
                push(3000)                   // grows 8 → 4096 with a wrapped head, then again
                try pop(1000)
                push(5000)                   // grows with head at 1000
                #expect(q.count == 1 + 7 + 3000 - 1000 + 5000)
                try pop(2000)
                #expect(order.all == Array(0..<3005), "FIFO broken across growth")
                #expect(released.value == 3005, "\(released.value) bodies released after 3005 ran")
                q.deallocate()               // 5,008 launches still queued
                #expect(released.value == next, "\(released.value) of \(next) bodies released after deallocate()")
                #expect(order.all.count == 3005, "deallocate() ran a body")
            }
            #expect(weakParent.c == nil, "a parent reference leaked (or was over-released) by the ring")
            #expect(observers.allSatisfy { $0.isPending }, "deallocate() settled an observer")
        }
    }

    // MARK: The coroutine a lazily started body runs in

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
    @Test("Coroutine.current inside a lazily started body: its own coroutine (not the parent's), stable across suspensions, joinable, finished with no error, then freed")
    func currentInsideLazyBody() async throws {
        let weak = Kit.WeakCoroutines()
        try await Kit.withScheduler("r12b-current") { s in
            let report = try await Coroutine.async(on: s) { () throws -> [String] in
                let me = try #require(Coroutine.current)
                var problems: [String] = []
                let promises = (0..<3).map { i in
                    Coroutine.async { () throws -> Coroutine? in
                        let c = Coroutine.current
                        if let c { weak.add(c) }
                        try Coroutine.yield()
                        if Coroutine.current !== c { throw Boom() }
                        _ = i
                        return c
                    }
                }
                let children = try promises.map { try $0.await() }
                for (i, c) in children.enumerated() {
                    guard let c else { problems.append("\(i): no current coroutine"); continue }
                    if c === me { problems.append("\(i): the parent's coroutine") }
                    if c.scheduler !== s { problems.append("\(i): on \(c.scheduler.name)") }
                    if c.name != nil { problems.append("\(i): named \(c.name!)") }
                    try c.join()   // finishes just after settling its promise
                    if !c.isFinished { problems.append("\(i): not finished after join") }
                    if c.error != nil { problems.append("\(i): error \(c.error!)") }
                    if c.isCancelled { problems.append("\(i): cancelled") }
                }
                if Set(children.compactMap { $0.map(ObjectIdentifier.init) }).count != 3 {
                    problems.append("siblings share a coroutine")
                }
                return problems
            }.value
            #expect(report.isEmpty, "\(report)")
        }
        #expect(weak.count == 3)
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
    @Test("withTimeout inside a lazily started body: the delay is interrupted, the promise rejects with timedOut, the coroutine is freed")
    func withTimeoutInsideLazyBody() async throws {
        let weak = Kit.WeakCoroutines()
        let released = Kit.Counter()
        try await Kit.withScheduler("r12b-timeout") { s in
            let outcomes = try await Coroutine.async(on: s) { () throws -> [String] in
                let ps = (0..<20).map { i in
                    let tracker = Kit.Tracker(released)
                    return Coroutine.async { () throws -> Int in
                        withExtendedLifetime(tracker) {}
                        if let c = Coroutine.current { weak.add(c) }
                        return try Coroutine.withTimeout(.milliseconds(i % 2 == 0 ? 50 : 30_000)) {
                            if i % 2 == 0 { try Coroutine.delay(hangBound) }
                            return i
                        }
                    }
                }
                let start = ContinuousClock.now
                let results = ps.map { p in Kit.describe(Result { try p.await() }) }
                if ContinuousClock.now - start > .seconds(20) { return ["took \(ContinuousClock.now - start)"] }
                return results
            }.value
            #expect(outcomes == (0..<20).map { $0 % 2 == 0 ? "timedOut" : "value \($0)" })
        }
        #expect(released.value == 20)
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
    @Test("cancel(after:) on a lazily started coroutine (Coroutine.current): it fires into a delay and rejects the promise; armed by a body that ends first, its timer does not keep the coroutine alive")
    func cancelAfterOnLazyCoroutine() async throws {
        let weak = Kit.WeakCoroutines()
        try await Kit.withScheduler("r12b-cancel-after") { s in
            let (fired, quick) = try await Coroutine.async(on: s) { () throws -> (String, String) in
                let start = ContinuousClock.now
                let fired = Coroutine.async { () throws -> Int in
                    let me = try #require(Coroutine.current)
                    weak.add(me)
                    me.cancel(after: .milliseconds(50))
                    try Coroutine.delay(hangBound)
                    return 1
                }
                let quick = Coroutine.async { () throws -> Int in
                    let me = try #require(Coroutine.current)
                    weak.add(me)
                    me.cancel(after: .seconds(600))   // released when the coroutine finishes
                    return 2
                }
                let a = Kit.describe(Result { try fired.await() })
                let b = Kit.describe(Result { try quick.await() })
                if ContinuousClock.now - start > .seconds(20) { return ("took \(ContinuousClock.now - start)", b) }
                return (a, b)
            }.value
            #expect(fired == "cancelled")
            #expect(quick == "value 2")
        }
        #expect(weak.count == 2)
        // A timer that kept `quick` would keep it for 600 s.
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    // MARK: Promise.cancel() once the body started

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
    @Test("Promise.cancel() from a sibling coroutine after a lazily created body started cancels its coroutine: the delay throws at once, onCancel runs once, the coroutine is freed",
          arguments: [false, true])
    func promiseCancelAfterStartReachesCoroutine(eager: Bool) async throws {
        let weak = Kit.WeakCoroutines()
        let cancelHandlers = Kit.Counter()
        let unwound = Kit.Counter()
        try await Kit.withScheduler("r12b-pcancel-started-\(eager)") { s in
            let outcome = try await Coroutine.async(on: s) { () throws -> String in
                let started = Promise<Void>()
                let p = Coroutine.async(name: eager ? "eager" : nil) { () throws -> Int in
                    defer { unwound.increment() }
                    if let c = Coroutine.current { weak.add(c) }
                    started.fulfill(())
                    try Coroutine.delay(hangBound)
                    return 1
                }
                p.onCancel { cancelHandlers.increment() }
                let canceller = Coroutine.async { () throws -> Void in
                    try started.await()
                    p.cancel()
                }
                try canceller.await()
                let start = ContinuousClock.now
                let r = Kit.describe(Result { try p.await() })
                // The body must end by the cancellation, not by the 60 s delay.
                return ContinuousClock.now - start > .seconds(20) ? "took too long" : r
            }.value
            #expect(outcome == "cancelled")
            // The delay was interrupted: the body unwound (a 60 s delay would make this fail).
            #expect(await Kit.eventually { unwound.value == 1 })
        }
        #expect(await Kit.eventually { cancelHandlers.value == 1 })
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
    @Test("a lazily started body cancelling its own promise: the promise says cancelled, the next suspension throws, the body's later fulfil does not override")
    func bodyCancelsOwnPromise() async throws {
        try await Kit.run { () throws -> Void in
            let own = Kit.Box<Promise<Int>?>(nil)
            let afterCancel = Kit.Box<String>("not reached")
            let p = Coroutine.async { () throws -> Int in
                guard let me = own.value else { throw Boom() }   // set before the parent yields
                me.cancel()
                afterCancel.value = Coroutine.isActive ? "active" : "inactive"
                do { try Coroutine.yield() } catch is CancellationError {
                    afterCancel.value += ", yield threw"
                    return 7   // its fulfil must lose
                }
                return 8
            }
            own.value = p
            #expect(throws: CancellationError.self) { try p.await() }
            #expect(afterCancel.value == "inactive, yield threw")
        }
    }
}
