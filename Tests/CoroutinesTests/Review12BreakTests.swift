import CCoroutines
import Dispatch
import Foundation
import Synchronization
import CoroutinesTestSupport
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias Tally = CoroutineTestKit.Tally

/// Review 12: `Coroutine.async` from a coroutine onto its own scheduler creates its coroutine
/// only when the launch reaches the head of the run queue (`PendingLaunch`); schedulers tidy the
/// heap after 65,536 reaped coroutines; `dumpAll()` lists launches not started yet.
///
/// Everything must look as if the coroutine had been created at launch, which is what the same
/// call with a `name:` (never lazy) does: several tests run both forms (`eager`) side by side.
@Suite("Review 12: lazily created Coroutine.async coroutines, heap tidy-up, dumpAll", .serialized)
struct Review12BreakTests {
    private struct Boom: Error {}

    /// A set of indices shared between threads.
    private final class Indices: Sendable {
        private let set = Mutex<Set<Int>>([])
        func insert(_ i: Int) { set.locked { _ = $0.insert(i) } }
        func contains(_ i: Int) -> Bool { set.locked { $0.contains(i) } }
    }

    private static func describe<T>(_ r: Result<T, any Error>?) -> String {
        switch r {
        case nil: "pending"
        case .success(let v): "value \(v)"
        case .failure(let e) where e is CancellationError: "cancelled"
        case .failure(CoroutineError.schedulerStopped): "stopped"
        case .failure(let e as Boom): "boom \(e)"
        case .failure(let e): "error \(e)"
        }
    }

    /// `Coroutine.async`, lazily created (name nil) or created at once (a name).
    private static func spawn<T: Sendable>(eager: Bool, on s: CoroutineScheduler? = nil,
                                           _ body: @escaping @Sendable () throws -> T) -> Promise<T> {
        Coroutine.async(on: s, name: eager ? "eager" : nil, body)
    }

    // MARK: Cancellation of everything on a scheduler (runBlocking's error path, Coroutine.run's task)

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
                        child.value = Self.spawn(eager: eager) { ran.increment(); return 1 }
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
        #expect(Self.describe(try #require(child.value).result) == "cancelled")
    }

    /// A chain of `Coroutine.async` launches, each queued by the previous one, which then
    /// finishes. It ends by itself after `limit` (counted in `hitLimit`).
    private static func chain(eager: Bool, links: Kit.Counter, hitLimit: Kit.Counter,
                              until limit: ContinuousClock.Instant) {
        _ = spawn(eager: eager) { () -> Int in
            links.increment()
            if ContinuousClock.now > limit {
                hitLimit.increment()
                return 0
            }
            chain(eager: eager, links: links, hitLimit: hitLimit, until: limit)
            return 0
        }
    }

    @Test("cancelling Coroutine.run's task ends a chain of Coroutine.async launches whose parents have finished",
          arguments: [false, true])
    func taskCancelEndsAsyncChain(eager: Bool) async throws {
        let links = Kit.Counter()
        let hitLimit = Kit.Counter()
        // Generous: only a chain that outlives its cancellation gets near it (under TSan, with
        // other suites running, 1,000 links once took more than 2 s).
        let limit = ContinuousClock.now + .seconds(30)
        let task = Task {
            try await Kit.run { Self.chain(eager: eager, links: links, hitLimit: hitLimit, until: limit) }
        }
        #expect(await Kit.eventually(timeout: .seconds(20)) { links.value > 1000 })
        task.cancel()
        let atCancel = links.value
        _ = try? await task.value
        #expect(hitLimit.value == 0,
                "the chain outlived the cancellation of Coroutine.run: \(links.value - atCancel) links after it")
    }

    @Test("runBlocking's body throws while a chain of Coroutine.async launches runs: the chain ends",
          arguments: [false, true])
    func bodyThrowsEndsAsyncChain(eager: Bool) async throws {
        let links = Kit.Counter()
        let hitLimit = Kit.Counter()
        // Generous: only a chain that outlives its cancellation gets near it (under TSan, with
        // other suites running, 1,000 links once took more than 2 s).
        let limit = ContinuousClock.now + .seconds(30)
        let thrown = try await Kit.onPlainThread { () -> Bool in
            do {
                try Coroutine.runBlocking { () throws -> Void in
                    Self.chain(eager: eager, links: links, hitLimit: hitLimit, until: limit)
                    while links.value < 1000 { try Coroutine.yield() }
                    throw Boom()
                }
                return false
            } catch {
                return error is Boom
            }
        }
        #expect(thrown)
        #expect(hitLimit.value == 0, "the chain went on after runBlocking's body threw (\(links.value) links)")
    }

    @Test("stop() from another thread ends a chain of Coroutine.async launches whose parents have finished")
    func stopEndsAsyncChain() async throws {
        let links = Kit.Counter()
        let hitLimit = Kit.Counter()
        let s = CoroutineScheduler(name: "r12-chain-stop")
        // Generous: only a chain that outlives its cancellation gets near it (under TSan, with
        // other suites running, 1,000 links once took more than 2 s).
        let limit = ContinuousClock.now + .seconds(30)
        Coroutine.launch(on: s) { Self.chain(eager: false, links: links, hitLimit: hitLimit, until: limit) }
        #expect(await Kit.eventually(timeout: .seconds(20)) { links.value > 1000 })
        s.stop()
        #expect(await Kit.eventually(timeout: .seconds(10)) { s.isStopped })
        #expect(hitLimit.value == 0, "the chain went on after stop()")
        #expect(s.liveCount == 0)
    }

    // MARK: Settlement by something other than cancel()

    @Test("fulfilling or rejecting a Coroutine.async promise before its coroutine starts does not skip the body (only cancel() does)",
          arguments: [false, true])
    func externalSettlementDoesNotCancel(eager: Bool) async throws {
        let ran = Kit.Log<String>()
        let results = try await Kit.run { () throws -> [String] in
            let a = Self.spawn(eager: eager) { () -> Int in ran.append("a"); return 1 }
            let b = Self.spawn(eager: eager) { () -> Int in ran.append("b"); return 2 }
            let c = Self.spawn(eager: eager) { () -> Int in ran.append("c"); return 3 }
            a.fulfill(10)
            b.reject(Boom())
            c.cancel()
            try Coroutine.yield()   // behind a, b and c
            return [a, b, c].map { Self.describe($0.result) }
        }
        #expect(results == ["value 10", "boom Boom()", "cancelled"])
        #expect(ran.all == ["a", "b"], "bodies that ran: \(ran.all)")
    }

    // MARK: Races with other threads

    @Test("Promise.cancel from a plain thread racing materialization: each promise settles once, observers run once, no body escapes a cancel() that returned, all released")
    func promiseCancelRacesMaterialization() async throws {
        try await Kit.withScheduler("r12-pcancel") { s in
            let n = 3000, batch = 50
            let released = Kit.Counter()
            let weak = Kit.WeakCoroutines()
            let cancelReturned = Indices()
            let escaped = Kit.Log<Int>()
            let observed = Tally(n)
            let batches = Kit.Log<[Promise<Int>]>()
            let published = DispatchSemaphore(value: 0)
            let launcher = Coroutine.async(on: s) { () throws -> [Promise<Int>] in
                var all: [Promise<Int>] = []
                for b in 0..<(n / batch) {
                    var ps: [Promise<Int>] = []
                    for j in 0..<batch {
                        let i = b * batch + j
                        let tracker = Kit.Tracker(released)
                        let p = Coroutine.async { () throws -> Int in
                            withExtendedLifetime(tracker) {}
                            if let c = Coroutine.current { weak.add(c) }
                            if cancelReturned.contains(i) && Coroutine.isActive { escaped.append(i) }
                            if i % 3 == 0 { try Coroutine.yield() }
                            return i
                        }
                        _ = p.always { _ in observed.bump(i) }
                        ps.append(p)
                    }
                    batches.append(ps)
                    published.signal()
                    all += ps
                    if b % 2 == 0 { try Coroutine.yield() }
                }
                for p in all { _ = try? p.await() }
                return all
            }
            try await Kit.onPlainThread {
                for b in 0..<(n / batch) {
                    published.wait()
                    for (j, p) in batches.all[b].enumerated() {
                        let i = b * batch + j
                        guard i % 4 != 3 else { continue }
                        for _ in 0..<((i % 7) * 30) { _ = Kit.opaque(0) }
                        p.cancel()
                        cancelReturned.insert(i)
                    }
                }
            }
            let all = try await launcher.value
            #expect(all.count == n)
            var bad: [String] = []
            for (i, p) in all.enumerated() {
                let d = Self.describe(p.result)
                if d != "value \(i)" && !(i % 4 != 3 && d == "cancelled") { bad.append("\(i): \(d)") }
            }
            #expect(bad.isEmpty, "\(bad.prefix(10))")
            #expect(escaped.all.isEmpty, "bodies running uncancelled after their promise's cancel() returned: \(escaped.all.prefix(10))")
            #expect(await Kit.eventually(timeout: .seconds(10)) { observed.total >= n })
            _ = try await Kit.onSchedulerLoop(s) {}   // observers queued late would have run by now
            #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once: \(observed.all.enumerated().filter { $0.element != 1 }.prefix(10))")
            #expect(await Kit.eventually(timeout: .seconds(10)) { released.value == n }, "\(released.value) of \(n) bodies released")
            #expect(await Kit.eventually(timeout: .seconds(10)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            #expect(await Kit.eventually(timeout: .seconds(10)) { s.liveCount == 0 }, "liveCount \(s.liveCount)")
        }
    }

    @Test("a parent cancelled from a plain thread while its Coroutine.async children are pending or starting: none escapes, all settle, all released",
          arguments: 0..<4)
    func parentCancelRacesMaterialization(round: Int) async throws {
        try await Kit.withScheduler("r12-parent-\(round)") { s in
            let released = Kit.Counter()
            let weak = Kit.WeakCoroutines()
            let cancelReturned = Atomic<Bool>(false)
            let escaped = Kit.Counter()
            let children = Kit.Log<Promise<Int>>()
            let started = DispatchSemaphore(value: 0)
            let parent = Coroutine.launch(on: s) {
                for i in 0..<50_000 {
                    let tracker = Kit.Tracker(released)
                    children.append(Coroutine.async { () throws -> Int in
                        withExtendedLifetime(tracker) {}
                        if let c = Coroutine.current { weak.add(c) }
                        if cancelReturned.load(ordering: .sequentiallyConsistent) && Coroutine.isActive {
                            escaped.increment()
                        }
                        try Coroutine.yield()
                        return i
                    })
                    if i == 200 { started.signal() }
                    if i % (3 + round) == 0 { try Coroutine.yield() }   // throws once cancelled
                }
            }
            try await Kit.onPlainThread {
                started.wait()
                for _ in 0..<(round * 2_000) { _ = Kit.opaque(0) }
                parent.cancel()
                cancelReturned.store(true, ordering: .sequentiallyConsistent)
            }
            try await parent.join()
            #expect(parent.error is CancellationError)
            let all = children.all
            var outcomes: [String: Int] = [:]
            for (i, p) in all.enumerated() {
                let d = Self.describe(await p.valueResult)
                outcomes[d == "value \(i)" ? "value" : d, default: 0] += 1
            }
            #expect(Set(outcomes.keys).isSubset(of: ["value", "cancelled"]), "\(outcomes)")
            #expect(outcomes["cancelled", default: 0] > 0, "\(outcomes)")
            #expect(escaped.value == 0, "\(escaped.value) children ran uncancelled after the parent's cancel() returned")
            #expect(await Kit.eventually(timeout: .seconds(10)) { released.value == all.count },
                    "\(released.value) of \(all.count) bodies released")
            #expect(await Kit.eventually(timeout: .seconds(10)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            #expect(await Kit.eventually(timeout: .seconds(10)) { s.liveCount == 0 }, "liveCount \(s.liveCount)")
        }
    }

    @Test("stop() from a plain thread with thousands of Coroutine.async launches pending: each promise settles once, each body released once, nothing alive",
          arguments: [true, false])
    func stopWithThousandsPending(holdThread: Bool) async throws {
        let n = 5000
        let s = CoroutineScheduler(name: "r12-stop-\(holdThread)")
        let released = Kit.Counter()
        let ran = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let observed = Tally(n)
        let promises = Kit.Box<[Promise<Int>]>([])
        let queued = DispatchSemaphore(value: 0)
        let stopCalled = Atomic<Bool>(false)
        Coroutine.launch(on: s) {
            if let c = Coroutine.current { weak.add(c) }
            var ps: [Promise<Int>] = []
            for i in 0..<n {
                let tracker = Kit.Tracker(released)
                let p = Coroutine.async { () throws -> Int in
                    withExtendedLifetime(tracker) {}
                    if let c = Coroutine.current { weak.add(c) }
                    ran.increment()
                    try Coroutine.yield()
                    return i
                }
                _ = p.always { _ in observed.bump(i) }
                ps.append(p)
            }
            promises.value = ps
            queued.signal()
            // Optionally hold the thread until the stop was requested: all n are still pending then.
            while holdThread && !stopCalled.load(ordering: .sequentiallyConsistent) { ccoro_cpu_relax() }
            for p in ps { _ = try? p.await() }
        }
        try await Kit.onPlainThread {
            queued.wait()
            s.stop()
            stopCalled.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(await Kit.eventually(timeout: .seconds(10)) { s.isStopped })
        let all = promises.value
        #expect(all.count == n)
        var outcomes: [String: Int] = [:]
        for (i, p) in all.enumerated() {
            let d = Self.describe(p.result)
            outcomes[d == "value \(i)" ? "value" : d, default: 0] += 1
        }
        #expect(Set(outcomes.keys).isSubset(of: ["value", "cancelled", "stopped"]), "\(outcomes)")
        #expect(await Kit.eventually(timeout: .seconds(10)) { observed.total >= n })
        #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once")
        #expect(released.value == n, "\(released.value) of \(n) bodies released")
        #expect(await Kit.eventually(timeout: .seconds(10)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
        #expect(s.liveCount == 0)
        #expect(s.pendingLaunchCount.load(ordering: .relaxed) == 0)
    }

    @Test("stop() from inside a coroutine that keeps launching Coroutine.async children after it: later ones finish as stopped, none runs")
    func stopFromInsideThenKeepLaunching() async throws {
        let s = CoroutineScheduler(name: "r12-stop-inside")
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
        #expect(await Kit.eventually(timeout: .seconds(10)) { s.isStopped })
        #expect(ranAfterStop.value == 0)
        #expect(after.value.allSatisfy { Self.describe($0.result) == "stopped" })
        #expect(released.value == 500)
    }

    // MARK: Start order

    @Test("start order is FIFO across a woken coroutine, Coroutine.async (implicit and explicit scheduler), launch and a yielding child")
    func fifoAcrossWokenAsyncAndLaunch() async throws {
        try await Kit.withScheduler("r12-fifo") { s in
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

    @Test("a burst of pending launches on a fresh scheduler (no cached stack for the direct switch) interleaved with wake-ups of a consumer: each woken run comes after the launches queued before it")
    func orderWithWakeups() async throws {
        try await Kit.withScheduler("r12-wakeups") { s in
            let log = Kit.Log<Int>()
            let ch = Channel<Int>(capacity: .unbounded)
            let consumer = Coroutine.launch(on: s) {
                for v in ch { log.append(-v - 1) }
            }
            try await Coroutine.async(on: s) { () throws -> Void in
                try Coroutine.yield()   // the consumer now waits
                var ps: [Promise<Void>] = []
                for i in 0..<2000 {
                    ps.append(Coroutine.async { log.append(i) })
                    if i % 100 == 0 { _ = try ch.trySend(i); try Coroutine.yield() }   // the consumer runs behind the launches queued so far
                }
                for p in ps { try p.await() }
            }.value
            ch.close()
            try await consumer.join()
            let all = log.all
            #expect(all.filter { $0 >= 0 } == Array(0..<2000))
            #expect(all.filter { $0 < 0 } == stride(from: 0, to: 2000, by: 100).map { -$0 - 1 })
            for v in stride(from: 0, to: 2000, by: 100) {
                let launched = try #require(all.firstIndex(of: v))
                let received = try #require(all.firstIndex(of: -v - 1))
                #expect(received > launched, "value \(v) received before the launch queued ahead of its wake-up ran")
            }
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
            #expect(Self.describe(try #require(box.value).result) == "value 7")
        }
    }

    /// Its deinit launches a `Coroutine.async` (result into `box`).
    private final class SpawningError: Error, @unchecked Sendable {
        let box: Kit.Box<Promise<Int>?>
        init(_ box: Kit.Box<Promise<Int>?>) { self.box = box }
        deinit { box.value = Coroutine.async { 9 } }
    }

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
        #expect(Self.describe(try #require(child.value).result) == "cancelled")
        #expect(Self.describe(try #require(spawned.value).result) == "value 9")
    }

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
            return ps.map { Self.describe($0.result) }
        }
        #expect(ran.value == 0)
        #expect(cancelled == ["cancelled", "cancelled", "cancelled"])
    }

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
                s.timeout(after: .seconds(5)) { Coroutine.async { -1 } }
            }
            #expect(try chosen.await() == 9)
        }
    }

    // MARK: Scale, memory and diagnostics

    private static func tree(depth: Int, fan: Int) throws -> Int {
        if depth == 0 { return 1 }
        let ps = (0..<fan).map { _ in Coroutine.async { try tree(depth: depth - 1, fan: fan) } }
        return try ps.reduce(1) { try $0 + $1.await() }
    }

    @Test("a 111,111-coroutine fan-out of Coroutine.async with dumpAll racing from another thread: right sum, pending counts sane, liveCount back to 0")
    func deepFanOutWithDumpAll() async throws {
        let depth = Kit.heavyTestsEnabled ? 5 : 4
        let expected = (0...depth).reduce(0) { $0 + Int(pow(10.0, Double($1))) }
        let scheduler = Kit.Box<CoroutineScheduler?>(nil)
        let stopDumping = Atomic<Bool>(false)
        let dumps = Kit.Counter()
        let bad = Kit.Log<String>()
        async let dumper: Void = Kit.onPlainThread {
            while !stopDumping.load(ordering: .relaxed) {
                let d = Coroutine.dumpAll()
                dumps.increment()
                for line in d.split(separator: "\n") where line.contains("(not started)") {
                    if !(line.hasPrefix("unnamed on ") && line.hasSuffix(": ready (not started)")) { bad.append(String(line)) }
                }
            }
        }
        let sum = try await Kit.run { () throws -> Int in
            scheduler.value = Coroutine.current?.scheduler
            return try Self.tree(depth: depth, fan: 10)
        }
        stopDumping.store(true, ordering: .relaxed)
        try await dumper
        #expect(sum == expected)
        #expect(bad.all.isEmpty, "\(bad.all.prefix(5))")
        #expect(dumps.value > 0)
        let s = try #require(scheduler.value)
        #expect(s.liveCount == 0)
        #expect(s.pendingLaunchCount.load(ordering: .relaxed) == 0)
    }

    @Test("stacks in use return to their starting value after repeated 111,111-coroutine fan-outs (child process)",
          .enabled(if: Kit.exitTestsEnabled && Kit.heavyTestsEnabled, "COROUTINES_EXIT_TESTS=0 or COROUTINES_HEAVY_TESTS=0"))
    func fanOutReturnsStacks() async {
        await ChildProcess.run(.success, id: "fanOutReturnsStacks") {
            let before = StackAllocator.shared.stacksInUse
            let s = CoroutineScheduler(name: "r12-fan")
            for _ in 0..<3 {
                let sum = try await Coroutine.async(on: s) { try Review12BreakTests.tree(depth: 5, fan: 10) }.value
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
            if !(await Kit.eventually(timeout: .seconds(10)) { StackAllocator.shared.stacksInUse == before }) { exit(15) }
        }
    }

    @Test("Coroutine.run and runBlocking return only after every pending launch ran (a chain of 10,000 and a fan of 10,000 left behind by the body)")
    func runWaitsForPendingLaunches() async throws {
        let ran = Kit.Counter()
        @Sendable func chain(_ k: Int) {
            _ = Coroutine.async { () -> Int in
                ran.increment()
                if k > 0 { chain(k - 1) }
                return k
            }
        }
        try await Kit.run {
            chain(9_999)
            for _ in 0..<10_000 { _ = Coroutine.async { ran.increment() } }
        }
        #expect(ran.value == 20_000)
        try await Kit.onPlainThread {
            try Coroutine.runBlocking {
                chain(9_999)
                for _ in 0..<10_000 { _ = Coroutine.async { ran.increment() } }
            }
        }
        #expect(ran.value == 40_000)
    }
}

