import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias Tally = CoroutineTestKit.Tally

/// Coroutines under races and at scale: launches, cancellation, joins and lifetimes across
/// threads, and tens of thousands of launches (<doc:CoroutineLifecycle>, <doc:Cancellation>). Tests
/// with an `eager` argument run a lazily created `Coroutine.async` and the same call with a `name:`
/// (`Kit.spawn`), which is never lazy, and expect the same.
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Coroutines under races and at scale", .serialized)
struct CoroutineStressTests {
    // MARK: Lifetimes

    /// Guards an invariant (the run queue holds no references to its coroutines).
    @Test("handles dropped at once: yields, direct switches and finishes interleave; every coroutine freed")
    func droppedHandlesYieldAndFinish() async throws {
        let weak = Kit.WeakCoroutines()
        let finished = Kit.Counter()
        try await Kit.run {
            let ch = Channel<Int>()
            for i in 0..<300 {
                // The handle is dropped here: only the registry keeps the coroutine alive.
                weak.add(Coroutine.launch {
                    for _ in 0..<(i % 5) { try Coroutine.yield() }
                    if i % 3 == 0 {
                        try ch.send(i)
                    } else if i % 3 == 1 {
                        _ = try ch.receive()
                    }
                    // Children launched, queued unstarted, some cancelled at once, handles dropped.
                    if i % 7 == 0 {
                        let child = Coroutine.launch { try Coroutine.yield(); finished.increment() }
                        if i % 14 == 0 { child.cancel() }
                    }
                    finished.increment()
                })
            }
        }
        // i % 3 == 0: 100 senders, i % 3 == 1: 100 receivers: all paired.
        #expect(finished.value == 300 + (0..<300).filter { $0 % 7 == 0 && $0 % 14 != 0 }.count)
        #expect(weak.count == 300)
        #expect(weak.alive == 0)
    }

    // MARK: Cancellation of parents and children

    /// Guards an invariant (parent and child links are guarded by a spin lock, without reference
    /// counting).
    @Test("a parent cancelled from a plain thread while it launches children onto two schedulers and they finish: all children end, the list empties")
    func parentCancelRacesLaunches() async throws {
        try await ChannelTestKit.withSchedulers(2, "pc") { s in
            let weak = Kit.WeakCoroutines()
            for round in 0..<40 {
                let launched = Kit.Counter()
                let childPromises = Kit.Log<Promise<Int>>()
                let started = Promise<Void>()
                let parent = Coroutine.launch(on: s[round % 2]) {
                    started.fulfill(())
                    var i = 0
                    while !Coroutine.current!.isCancelled {
                        let target = s[i % 2]
                        let k = i
                        if k % 2 == 0 {
                            childPromises.append(Coroutine.async(on: target) { () throws -> Int in
                                if k % 3 == 0 { try Coroutine.yield() }
                                return k
                            })
                        } else {
                            weak.add(Coroutine.launch(on: target) {
                                // Grandchildren, so that cancel walks two levels while they unlink.
                                let g = Coroutine.launch { try Coroutine.yield() }
                                if k % 5 == 0 { try g.join() }
                            })
                        }
                        launched.increment()
                        i += 1
                        if i % 16 == 0 { try? Coroutine.yield() }
                        if i > 5_000 { break }
                    }
                }
                weak.add(parent)
                try await started.value
                try await Kit.onPlainThread {
                    for _ in 0..<((round % 8) * 2_000) { _ = Kit.opaque(0) }
                    parent.cancel()
                }
                try await parent.join()
                for p in childPromises.all {
                    let d = Kit.describe(await p.valueResult)
                    #expect(d == "cancelled" || d.hasPrefix("value "), "round \(round): \(d)")
                }
                #expect(await Kit.eventually { parent.withShared { $0.firstChild == nil } }, "round \(round): children still linked")
                // Every even launch was an async child whose promise was collected above.
                #expect(childPromises.all.count == (launched.value + 1) / 2, "round \(round)")
            }
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) of \(weak.count) alive")
        }
    }

    /// Guards an invariant (parent and child links are guarded by a spin lock, without reference
    /// counting).
    @Test("cancel of a parent from many threads at once while children launched on other schedulers unlink: no child missed, none freed early")
    func concurrentCancelsWalkChildren() async throws {
        try await ChannelTestKit.withSchedulers(3, "cc") { s in
            for round in 0..<20 {
                let gate = Promise<Void>()
                let ready = WaitGroup()
                let endedCancelled = Kit.Counter()
                let n = 60
                ready.add(n)
                let parent = Coroutine.launch(on: s[0]) {
                    for i in 0..<n {
                        Coroutine.launch(on: s[1 + i % 2]) {
                            ready.done()
                            do {
                                if i % 3 == 0 { return }   // finishes (unlinks) while the cancels walk
                                try gate.await()
                            } catch is CancellationError { endedCancelled.increment() }
                        }
                    }
                    do { try gate.await() } catch {}
                }
                try await Kit.onPlainThread { try Coroutine.runBlocking { try ready.wait() } }
                try await Kit.onPlainThreads(3) { _ in parent.cancel() }
                try await parent.join()
                let expected = (0..<n).filter { $0 % 3 != 0 }.count
                #expect(await Kit.eventually { endedCancelled.value == expected }, "round \(round): \(endedCancelled.value) of \(expected)")
                #expect(await Kit.eventually { parent.withShared { $0.firstChild == nil } })
                gate.fulfill(())
            }
        }
    }

    // MARK: Observers and joins racing the finish

    /// Guards an invariant (a coroutine finishes without reference counting while others observe
    /// it).
    @Test("isFinished, error, dumpAll and joins from coroutines and tasks race the finish: consistent answers, every join returns")
    func observersRaceFinish() async throws {
        try await ChannelTestKit.withSchedulers(2, "obs") { s in
            let stop = Atomic<Bool>(false)
            let dumps = Kit.Counter()
            // dumpAll from a plain thread the whole time (walks registries under the spin lock).
            let dumper = Task.detached {
                try await Kit.onPlainThread {
                    while !stop.load(ordering: .relaxed) {
                        let d = Coroutine.dumpAll()
                        if !d.isEmpty { dumps.increment() }
                    }
                }
            }
            let inconsistent = Kit.Log<String>()
            let n = 400
            let coroutines = (0..<n).map { i in
                Coroutine.launch(on: s[i % 2], name: "obs-\(i)") {
                    if i % 2 == 0 { try Coroutine.yield() }
                    if i % 25 == 0 { throw Kit.NumberedBoom(n: i) }   // reported as unobserved: keep them few
                }
            }
            // Pollers: once isFinished is true, error is final.
            try await Kit.onPlainThreads(2) { t in
                for (i, c) in coroutines.enumerated() where i % 2 == t {
                    while !c.isFinished { _ = c.error }
                    let e = c.error
                    let ok = i % 25 == 0 ? (e as? Kit.NumberedBoom) == Kit.NumberedBoom(n: i) : e == nil
                    if !ok { inconsistent.append("\(i): \(String(describing: e))") }
                }
            }
            // Joiners: coroutines on both schedulers and tasks, after or during the finish.
            let joiners = (0..<n).map { i in
                Coroutine.launch(on: s[(i + 1) % 2]) { try coroutines[i].join() }
            }
            try await withThrowingTaskGroup(of: Void.self) { g in
                for c in coroutines.prefix(100) { g.addTask { try await c.join() } }
                try await g.waitForAll()
            }
            for j in joiners { try await j.join(); #expect(j.error == nil) }
            stop.store(true, ordering: .relaxed)
            try await dumper.value
            #expect(inconsistent.all.isEmpty, "\(inconsistent.all.prefix(5))")
            #expect(dumps.value > 0)
        }
    }

    /// Guards an invariant (a coroutine finishes without reference counting while others observe
    /// it).
    @Test("joins of Coroutine.async promises and of launched coroutines from a plain thread race the finish on a busy scheduler")
    func promiseAwaitRacesFinishFromThreads() async throws {
        try await ChannelTestKit.withSchedulers(2, "paf") { s in
            let wrong = Kit.Counter()
            try await Kit.onPlainThreads(2) { t in
                do {
                    try Coroutine.runBlocking {
                        for i in 0..<800 {
                            let p = Coroutine.async(on: s[(i + t) % 2]) { i * 2 }
                            let c = Coroutine.launch(on: s[(i + t + 1) % 2]) { if i % 2 == 0 { try Coroutine.yield() } }
                            // Half read after a spin (settled: the fast path), half at once (wait).
                            if i % 2 == 1 { for _ in 0..<200 { _ = Kit.opaque(0) } }
                            if try p.await() != i * 2 { wrong.increment() }
                            try c.join()
                            if !c.isFinished || c.error != nil { wrong.increment() }
                        }
                    }
                } catch {
                    wrong.increment()
                }
            }
            #expect(wrong.value == 0)
        }
    }

    // MARK: Lazily created Coroutine.async coroutines

    /// A chain of `Coroutine.async` launches, each queued by the previous one, which then
    /// finishes. It ends by itself after `limit` (counted in `hitLimit`).
    private static func chain(eager: Bool, links: Kit.Counter, hitLimit: Kit.Counter,
                              until limit: ContinuousClock.Instant) {
        _ = Kit.spawn(eager: eager) { () -> Int in
            links.increment()
            if ContinuousClock.now > limit {
                hitLimit.increment()
                return 0
            }
            chain(eager: eager, links: links, hitLimit: hitLimit, until: limit)
            return 0
        }
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
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
        #expect(await Kit.eventually { links.value > 1000 })
        task.cancel()
        let atCancel = links.value
        _ = try? await task.value
        #expect(hitLimit.value == 0,
                "the chain outlived the cancellation of Coroutine.run: \(links.value - atCancel) links after it")
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
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
                    throw Kit.Boom()
                }
                return false
            } catch {
                return error is Kit.Boom
            }
        }
        #expect(thrown)
        #expect(hitLimit.value == 0, "the chain went on after runBlocking's body threw (\(links.value) links)")
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("stop() from another thread ends a chain of Coroutine.async launches whose parents have finished")
    func stopEndsAsyncChain() async throws {
        let links = Kit.Counter()
        let hitLimit = Kit.Counter()
        let s = CoroutineScheduler(name: "chain-stop")
        // Generous: only a chain that outlives its cancellation gets near it (under TSan, with
        // other suites running, 1,000 links once took more than 2 s).
        let limit = ContinuousClock.now + .seconds(30)
        Coroutine.launch(on: s) { Self.chain(eager: false, links: links, hitLimit: hitLimit, until: limit) }
        #expect(await Kit.eventually { links.value > 1000 })
        s.stop()
        #expect(await Kit.eventually { s.isStopped })
        #expect(hitLimit.value == 0, "the chain went on after stop()")
        #expect(s.liveCount == 0)
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("a parent cancelled from a plain thread while its Coroutine.async children are pending or starting: none escapes, all settle, all released",
          arguments: 0..<4)
    func parentCancelRacesMaterialization(round: Int) async throws {
        try await Kit.withScheduler("parent-\(round)") { s in
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
                let d = Kit.describe(await p.valueResult)
                outcomes[d == "value \(i)" ? "value" : d, default: 0] += 1
            }
            #expect(Set(outcomes.keys).isSubset(of: ["value", "cancelled"]), "\(outcomes)")
            #expect(outcomes["cancelled", default: 0] > 0, "\(outcomes)")
            #expect(escaped.value == 0, "\(escaped.value) children ran uncancelled after the parent's cancel() returned")
            #expect(await Kit.eventually { released.value == all.count },
                    "\(released.value) of \(all.count) bodies released")
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            #expect(await Kit.eventually { s.liveCount == 0 }, "liveCount \(s.liveCount)")
        }
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("a burst of pending launches on a fresh scheduler (no cached stack for the direct switch) interleaved with wake-ups of a consumer: each woken run comes after the launches queued before it")
    func orderWithWakeups() async throws {
        try await Kit.withScheduler("wakeups") { s in
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

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue, and `dumpAll()` lists the
    /// launches not started yet).
    @Test("a 111,111-coroutine fan-out of Coroutine.async with dumpAll racing from another thread: right sum, pending counts sane, liveCount back to 0")
    func deepFanOutWithDumpAll() async throws {
        let depth = TestEnvironment.heavyTestsEnabled ? 5 : 4
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
                    // Pool launches of other suites' pools are listed too (`pool launch on`).
                    if !((line.hasPrefix("unnamed on ") || line.hasPrefix("pool launch on "))
                         && line.hasSuffix(": ready (not started)")) { bad.append(String(line)) }
                }
            }
        }
        let sum = try await Kit.run { () throws -> Int in
            scheduler.value = Coroutine.current?.scheduler
            return try Kit.tree(depth: depth, fan: 10)
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

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
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

    /// Guards an invariant (pending launches keep their bodies in a ring of their own,
    /// `PendingLaunchQueue`).
    @Test("20,000 Coroutine.async launched without yielding (2,000 with COROUTINES_HEAVY_TESTS=0), after the ring's head moved: they start in order, every body and coroutine is released once, nothing stays pending",
          arguments: [false, true])
    func manyPendingGrowWrapped(freshScheduler: Bool) async throws {
        // A third of the bodies yield, and wait behind the rest: under ThreadSanitizer
        // (COROUTINES_HEAVY_TESTS=0) each of those also holds a fiber's mappings, and 20,000
        // took the process to the vm.max_map_count limit beside the other suites.
        let n = TestEnvironment.heavyTestsEnabled ? 20_000 : 2_000
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let starts = Kit.Log<Int>()
        let s = CoroutineScheduler(name: "r12b-grow-\(freshScheduler)")
        defer { s.stop() }
        if !freshScheduler {
            // Warm the scheduler's stack cache so that launches switch directly.
            try await Coroutine.async(on: s) { () throws -> Void in
                let ps = (0..<100).map { i in Coroutine.async { i } }
                for p in ps { _ = try p.await() }
            }.value
        }
        let sum = try await Coroutine.async(on: s) { () throws -> Int in
            // 40 run first: the ring's head is no longer at 0 when it grows.
            let first = (0..<40).map { i in Coroutine.async { () -> Int in starts.append(-1); return i } }
            try Coroutine.yield()
            var ps: [Promise<Int>] = []
            ps.reserveCapacity(n)
            for i in 0..<n {
                let tracker = Kit.Tracker(released)
                ps.append(Coroutine.async { () throws -> Int in
                    withExtendedLifetime(tracker) {}
                    if i % 1000 == 0, let c = Coroutine.current { weak.add(c) }
                    starts.append(i)
                    if i % 3 == 0 { try Coroutine.yield() }
                    return i
                })
            }
            #expect(s.pendingLaunchCount.load(ordering: .relaxed) == n)
            var total = 0
            for p in first + ps { total += try p.await() }
            return total
        }.value
        #expect(sum == (0..<40).reduce(0, +) + (0..<n).reduce(0, +))
        let started = starts.all.filter { $0 >= 0 }
        #expect(started == Array(0..<n), "launches did not start in launch order")
        #expect(await Kit.eventually { released.value == n }, "\(released.value) of \(n) bodies released")
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
        #expect(s.pendingLaunchCount.load(ordering: .relaxed) == 0)
        #expect(await Kit.eventually { s.liveCount == 0 })
    }

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
    @Test("a parent cancelled by a sibling while 3,000 Coroutine.async children are pending: the same outcomes lazily and eagerly (rejected with CancellationError, observers once, onCancel never, bodies released once)",
          arguments: [false, true])
    func parentCancelledWhilePending(eager: Bool) async throws {
        let n = 3000
        let released = Kit.Counter()
        let ran = Kit.Counter()
        let observed = Tally(n)
        let cancelHandlers = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        try await Kit.withScheduler("r12b-parent-\(eager)") { s in
            let children = try await Coroutine.async(on: s) { () throws -> [Promise<Int>] in
                let box = Kit.Box<[Promise<Int>]>([])
                let queued = Promise<Void>()
                let parent = Coroutine.launch {
                    var ps: [Promise<Int>] = []
                    for i in 0..<n {
                        let tracker = Kit.Tracker(released)
                        let p = Coroutine.async(name: eager ? "eager-\(i)" : nil) { () throws -> Int in
                            withExtendedLifetime(tracker) {}
                            if let c = Coroutine.current { weak.add(c) }
                            ran.increment()
                            return i
                        }
                        _ = p.always { _ in observed.bump(i) }
                        p.onCancel { cancelHandlers.increment() }
                        ps.append(p)
                    }
                    box.value = ps
                    queued.fulfill(())
                    // The sibling runs only when this coroutine suspends: the children are all
                    // still queued behind it then.
                    try Coroutine.delay(hangBound)
                }
                let sibling = Coroutine.async { () throws -> Void in
                    try queued.await()
                    parent.cancel()
                }
                try sibling.await()
                try parent.join()
                return box.value
            }.value
            #expect(children.count == n)
            let outcomes = Set(children.map { Kit.describe($0.result) })
            #expect(outcomes == ["cancelled"], "\(outcomes)")
        }
        #expect(ran.value == 0, "\(ran.value) bodies ran")
        #expect(released.value == n, "\(released.value) of \(n) bodies released")
        #expect(await Kit.eventually { observed.all.allSatisfy { $0 >= 1 } })
        #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once")
        #expect(cancelHandlers.value == 0, "onCancel ran \(cancelHandlers.value) times: the promise was rejected, not cancelled")
        #expect(weak.count == 0)
    }

    // MARK: Lifetimes under the registry's single reference

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("cancelled before they start (from a coroutine and from other threads): freed, bodies released once")
    func cancelledBeforeStart() async throws {
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let ran = Kit.Counter()
        try await Kit.withScheduler("cancel-before-start") { s in
            try await Kit.run {
                let inner = Coroutine.launch(on: s) {
                    for _ in 0..<200 {
                        let t = Kit.Tracker(released)
                        let c = Coroutine.launch { _ = t; ran.increment() }   // same scheduler
                        weak.add(c)
                        c.cancel()
                    }
                    try Coroutine.yield()
                }
                try inner.join()
                // From a plain thread: launched and cancelled right away (posted, not yet run).
                let handles = Kit.Box<[Coroutine]>([])
                let t = Thread {
                    var hs: [Coroutine] = []
                    for _ in 0..<200 {
                        let tr = Kit.Tracker(released)
                        let c = Coroutine.launch(on: s) { _ = tr; ran.increment() }
                        c.cancel()
                        hs.append(c)
                    }
                    handles.value = hs
                }
                t.start()
                while handles.value.count < 200 { try Coroutine.delay(.milliseconds(1)) }
                for c in handles.value { try c.join(); weak.add(c) }
                handles.value = []
            }
        }
        #expect(ran.value <= 200)
        #expect(await Kit.eventually { released.value == 400 }, "\(released.value) of 400 bodies released")
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines still alive")
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("dumpAll racing with coroutines finishing on other schedulers")
    func dumpAllRacingFinish() async throws {
        let weak = Kit.WeakCoroutines()
        let a = CoroutineScheduler(name: "dump-a")
        let b = CoroutineScheduler(name: "dump-b")
        defer { a.stop(); b.stop() }
        let stop = Kit.Box(false)
        let dumps = Kit.Counter()
        let dumping = Promise<Void>()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await Kit.onPlainThread {
                    while !stop.value {
                        let text = Coroutine.dumpAll()
                        precondition(!text.isEmpty)
                        if dumps.increment() == 1 { dumping.fulfill(()) }
                    }
                }
            }
            group.addTask {
                defer { stop.value = true }
                // Launch only once the dumper runs: on a loaded machine the launches could
                // otherwise all be over before its thread starts.
                try await dumping.value
                try await Kit.onPlainThreads(2) { k in
                    let s = k == 0 ? a : b
                    for i in 0..<3000 {
                        let c = Coroutine.launch(on: s, name: "short-\(i)") {
                            if i % 3 == 0 { try Coroutine.yield() }
                            if i % 5 == 0 { _ = Coroutine.launch { try Coroutine.yield() } }
                        }
                        if i % 100 == 0 { weak.add(c) }
                        if i % 11 == 0 { c.cancel() }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(dumps.value > 0)
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) alive; live: \(Coroutine.dumpAll().split(separator: "\n").filter { $0.contains("dump-") }.prefix(20))")
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("a chain of thousands of generations, each finishing before its child, frees every one")
    func deepChainParentFinishesFirst() async throws {
        let weak = Kit.WeakCoroutines()
        let leafGo = Promise<Void>()
        let leafDone = Promise<Void>()
        let depth = 3000
        try await Kit.withScheduler("chain") { s in
            @Sendable func generation(_ n: Int) {
                let c = Coroutine.launch(on: s) {
                    if n == depth {
                        try leafGo.await()
                        leafDone.fulfill(())
                    } else {
                        generation(n + 1)
                    }
                }
                if n % 100 == 0 { weak.add(c) }
            }
            generation(0)
            leafGo.fulfill(())
            try await leafDone.value
        }
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) of \(weak.count) sampled generations alive")
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("cancelling the root of a deep chain of joined generations unwinds all of them")
    func deepChainCancelled() async throws {
        let weak = Kit.WeakCoroutines()
        let depth = 2000
        let leafReady = Promise<Void>()
        let rootHandle = try await Kit.withScheduler("chain-cancel") { s -> Coroutine in
            @Sendable func generation(_ n: Int) throws {
                if n == depth {
                    leafReady.fulfill(())
                    try Coroutine.delay(hangBound)
                    return
                }
                let child = Coroutine.launch(on: s, stackSize: 16 * 1024) { try generation(n + 1) }
                if n % 100 == 0 { weak.add(child) }
                try child.join()
                try Coroutine.checkCancellation()
            }
            let root = Coroutine.launch(on: s) { try generation(0) }
            try await leafReady.value
            root.cancel()
            try await root.join()
            return root
        }
        #expect(rootHandle.error is CancellationError)
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) of \(weak.count) sampled generations alive")
    }
}
