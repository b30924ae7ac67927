import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Adversarial lifetime tests for the registry's single `Unmanaged` reference per coroutine,
/// the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in `wake`.
@Suite("Coroutine lifetimes under the registry's single reference")
struct LifetimeBreakTests {
    @Test("coroutines launched onto a stopped scheduler finish, release their bodies once and are freed")
    func launchOntoStopped() async throws {
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let s = CoroutineScheduler(name: "stopped")
        s.stop()
        #expect(await Kit.eventually { s.isStopped })
        try await Kit.onPlainThreads(2) { _ in
            for _ in 0..<500 {
                let t = Kit.Tracker(released)
                let c = Coroutine.launch(on: s) { _ = t }
                weak.add(c)
                precondition(c.isFinished)
                precondition(c.error is CoroutineError)
            }
        }
        #expect(released.value == 1000)
        #expect(weak.alive == 0)
    }

    @Test("launches racing with stop: every coroutine finishes once, bodies are released once, nothing leaks")
    func launchRacingStop() async throws {
        for round in 0..<20 {
            let released = Kit.Counter()
            let ran = Kit.Counter()
            let weak = Kit.WeakCoroutines()
            let s = CoroutineScheduler(name: "racing-stop-\(round)")
            let launched = Promise<Void>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await Kit.onPlainThreads(2) { k in
                        for i in 0..<300 {
                            let t = Kit.Tracker(released)
                            let c = Coroutine.launch(on: s) {
                                _ = t
                                ran.increment()
                                try Coroutine.yield()
                                try Coroutine.delay(.milliseconds(1))
                            }
                            weak.add(c)
                            if i == 50 && k == 0 { launched.fulfill(()) }
                            if i % 7 == 0 { c.cancel() }
                        }
                    }
                }
                group.addTask {
                    try await launched.value
                    s.stop()
                }
                try await group.waitForAll()
            }
            #expect(await Kit.eventually { s.isStopped })
            #expect(await Kit.eventually { released.value == 600 }, "round \(round): \(released.value) bodies released of 600")
            #expect(await Kit.eventually { weak.alive == 0 }, "round \(round): \(weak.alive) coroutines still alive")
            #expect(ran.value <= 600, "round \(round): \(ran.value) bodies ran for 600 launches")
        }
    }

    @Test("launches onto a scheduler that is stopping never keep its loop parked: it stops every time")
    func launchesDuringStopLetTheLoopEnd() async throws {
        // admit() registers a coroutine, then sees the stop request and finishes it on the
        // launching thread. A loop that saw it registered used to park with nothing to wake it
        // (once its idle spins had stopped paying off, as under load).
        var stuck: [String] = []
        for round in 0..<50 {
            let s = CoroutineScheduler(name: "stopping-\(round)")
            let idled = Kit.Counter(), launching = Kit.Counter()
            let done = Kit.Box(false)
            _ = Coroutine.launch(on: s) {
                // Idle gaps with nobody posting: the loop stops spinning before it parks.
                for _ in 0..<5 { try Coroutine.delay(.milliseconds(1)) }
                idled.increment()
                do { try Coroutine.delay(.seconds(60)) } catch {}   // until stop cancels it
                // End once launches are under way: the loop's next look at its live count
                // then races with their register-then-finish.
                while launching.value < 2 {}
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while idled.value == 0 { await Task.yield() }
                    s.stop()
                    try await Kit.onPlainThreads(2) { _ in
                        var first = true
                        while !done.value {
                            _ = Coroutine.launch(on: s) {}
                            if first { first = false; launching.increment() }
                        }
                    }
                }
                group.addTask {
                    defer { done.value = true }
                    while launching.value < 2 { await Task.yield() }
                    if !(await Kit.eventually(timeout: .seconds(5)) { s.isStopped }) { throw StuckLoop() }
                }
                do { try await group.waitForAll() } catch is StuckLoop { stuck.append(s.name) }
            }
        }
        #expect(stuck.isEmpty, "schedulers whose loop never ended: \(stuck)")
    }

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

    @Test("stop cancels suspended coroutines that have joiners (coroutines, tasks) and cancel timers")
    func stopWithJoinersAndTimers() async throws {
        for round in 0..<10 {
            let victim = CoroutineScheduler(name: "victim-\(round)")
            let joinersDone = Kit.Counter()
            let started = WaitGroup()
            started.add(50)
            var victims: [Coroutine] = []
            for _ in 0..<50 {
                let c = Coroutine.launch(on: victim) {
                    started.done()
                    let ch = Channel<Int>()
                    _ = try ch.receive()   // forever, until cancelled
                }
                c.cancel(after: .seconds(60))
                victims.append(c)
            }
            let list = victims
            victims = []
            try await Kit.withScheduler("joiners") { j in
                let js = (0..<50).map { i in
                    Coroutine.launch(on: j) {
                        try list[i].join()
                        joinersDone.increment()
                    }
                }
                try await Kit.run { try started.wait() }
                async let taskJoins: Void = {
                    for c in list { try await c.join() }
                }()
                victim.stop()
                try await taskJoins
                try await Kit.run { for c in js { try c.join() } }
            }
            #expect(joinersDone.value == 50)
            #expect(list.allSatisfy { $0.isFinished && $0.error is CancellationError })
            #expect(await Kit.eventually { victim.isStopped })
        }
    }

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

    @Test("cancelling the root of a deep chain of joined generations unwinds all of them")
    func deepChainCancelled() async throws {
        let weak = Kit.WeakCoroutines()
        let depth = 2000
        let leafReady = Promise<Void>()
        let rootHandle = try await Kit.withScheduler("chain-cancel") { s -> Coroutine in
            @Sendable func generation(_ n: Int) throws {
                if n == depth {
                    leafReady.fulfill(())
                    try Coroutine.delay(.seconds(60))
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

    @Test("generators run inside coroutines that finish, are cancelled and suspend inside the generator")
    func generatorsInsideCoroutines() async throws {
        let weak = Kit.WeakCoroutines()
        let released = Kit.Counter()
        let created = Kit.Counter()
        try await Kit.withScheduler("gen") { s in
            let cs = (0..<100).map { i in
                Coroutine.launch(on: s) {
                    created.increment()
                    let t = Kit.Tracker(released)
                    let g = Generator<Int> { yield in
                        _ = t
                        for k in 0..<10 {
                            try Coroutine.yield()        // suspends the host coroutine from the generator's stack
                            if k == 5 && i % 2 == 0 { try Coroutine.delay(.milliseconds(1)) }
                            try yield(k)
                        }
                    }
                    var sum = 0
                    for v in g { sum += v; if i % 3 == 0 && v == 3 { break } }
                    // A coroutine cancelled while it runs ends its generator early with
                    // CancellationError; otherwise the generator ran to the end.
                    if g.error != nil { precondition(g.error is CancellationError && Coroutine.current!.isCancelled) }
                    else if i % 3 != 0 { precondition(sum == 45) }
                }
            }
            for c in cs { weak.add(c) }
            // Cancel some while they run.
            for c in cs where c.hashValue % 4 == 0 { c.cancel() }
            try await Kit.run { for c in cs { try c.join() } }
        }
        #expect(created.value > 0)
        #expect(await Kit.eventually { released.value == created.value }, "\(released.value) of \(created.value) released")
        #expect(await Kit.eventually { weak.alive == 0 })
    }

    @Test("a promise awaited by many coroutines on two schedulers, half cancelled while it is fulfilled")
    func promiseAwaitRacingCancel() async throws {
        let a = CoroutineScheduler(name: "await-a")
        let b = CoroutineScheduler(name: "await-b")
        defer { a.stop(); b.stop() }
        for round in 0..<50 {
            let p = Promise<String>()
            let registered = WaitGroup()
            registered.add(40)
            let outcomes = Kit.Log<String>()
            let cs = (0..<40).map { i in
                Coroutine.launch(on: i % 2 == 0 ? a : b) {
                    registered.done()
                    do { outcomes.append(try p.await()) } catch is CancellationError { outcomes.append("cancelled") }
                }
            }
            try await Kit.run { try registered.wait() }
            try await Kit.onPlainThreads(2) { k in
                if k == 0 { p.fulfill("value \(round) with a heap-allocated string payload") }
                else { for c in cs where c.hashValue & 1 == 0 { c.cancel() } }
            }
            try await Kit.run { for c in cs { try c.join() } }
            let all = outcomes.all
            #expect(all.count == 40)
            #expect(all.allSatisfy { $0 == "cancelled" || $0 == "value \(round) with a heap-allocated string payload" })
        }
    }

    @Test("a woken awaiter reads the outcome while other threads query and observe the promise (TSan: no race)")
    func promiseAwaitRacingQueries() async throws {
        let a = CoroutineScheduler(name: "query-a")
        defer { a.stop() }
        for round in 0..<100 {
            let p = Promise<String>()
            let registered = Promise<Void>()
            let awaiter = Coroutine.async(on: a) { () -> String in
                registered.fulfill(())
                return try p.await()
            }
            try await registered.value
            let observed = Kit.Counter()
            try await Kit.onPlainThreads(2) { k in
                if k == 0 {
                    p.fulfill("round \(round) " + String(repeating: "z", count: 32))
                } else {
                    // Queries and registrations that take the promise's lock while the woken
                    // awaiter reads the outcome.
                    for _ in 0..<200 {
                        _ = p.isPending
                        _ = p.result
                        p.onCancel {}
                    }
                    _ = p.then { _ in observed.increment() }
                }
            }
            #expect(try await awaiter.value == "round \(round) " + String(repeating: "z", count: 32))
        }
    }

    @Test("a dedicated scheduler whose last handle is dropped is woken from plain threads as it stops")
    func wakeRacingSchedulerRelease() async throws {
        for _ in 0..<200 {
            let ch = Channel<Int>(capacity: 1)
            let done = Promise<Void>()
            let started = Promise<Void>()
            do {
                let s = CoroutineScheduler(name: "drop")
                Coroutine.launch(on: s) {
                    started.fulfill(())
                    _ = try? ch.receive()
                    done.fulfill(())
                }
                try await started.value
                s.stop()   // cancels the receiver; meanwhile a plain thread sends
            }
            try await Kit.onPlainThread { _ = try? ch.send(1) }
            try await done.value
        }
    }
}

private struct StuckLoop: Error {}
