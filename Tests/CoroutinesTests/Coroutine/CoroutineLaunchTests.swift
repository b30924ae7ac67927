import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Where and in which order coroutines run, and what they return: see the CoroutineLifecycle
/// article (<doc:CoroutineLifecycle>).
@Suite("Launching coroutines")
struct CoroutineLaunchTests {
    @Test("launch never runs the body inline")
    func launchIsNeverInline() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            log.append("before launch")
            let child = Coroutine.launch { log.append("child") }
            log.append("after launch")
            try child.join()
            log.append("joined")
        }
        #expect(log.all == ["before launch", "after launch", "child", "joined"])
    }

    @Test("on one scheduler coroutines start in launch order and run until they suspend")
    func launchOrder() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            // Given three coroutines launched in order A, B, C; A and B yield once.
            let a = Coroutine.launch { log.append("A1"); try Coroutine.yield(); log.append("A2") }
            let b = Coroutine.launch { log.append("B1"); try Coroutine.yield(); log.append("B2") }
            let c = Coroutine.launch { log.append("C1") }
            log.append("body")
            // When the body suspends in join.
            try a.join()
            try b.join()
            try c.join()
            log.append("end")
        }
        // Then they started in launch order, each ran until it suspended, and yields went FIFO.
        #expect(log.all == ["body", "A1", "B1", "C1", "A2", "B2", "end"])
    }

    @Test("coroutines woken by one promise resume in FIFO order, after the waker suspends")
    func fifoWakeUp() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            // Given five coroutines suspended on one promise, in order.
            let p = Promise<Int>()
            let waiters = (1...5).map { i in
                Coroutine.launch {
                    log.append("w\(i) waits")
                    let v = try p.await()
                    log.append("w\(i) got \(v)")
                }
            }
            try Coroutine.yield()
            // When the body fulfils it and goes on until it suspends.
            p.fulfill(7)
            log.append("fulfilled")
            for w in waiters { try w.join() }
        }
        // Then none ran inside fulfil, and they woke in the order they waited.
        #expect(log.all == ["w1 waits", "w2 waits", "w3 waits", "w4 waits", "w5 waits", "fulfilled",
                            "w1 got 7", "w2 got 7", "w3 got 7", "w4 got 7", "w5 got 7"])
    }

    @Test("delays end in deadline order, and a ready coroutine runs before any delay ends")
    func delayOrder() async throws {
        let log = Kit.Log<String>()
        let deadlines = Kit.Log<(String, UInt64)>()
        try await Kit.run {
            // The launch-order example of the CoroutineLifecycle article
            // (<doc:CoroutineLifecycle>), scaled down. Each delayed coroutine records its deadline
            // as it starts waiting: on a heavily loaded machine the scheduler thread can be
            // preempted between the two, and then the deadlines themselves swap.
            Coroutine.launch { log.append("1") }
            Coroutine.launch {
                deadlines.append(("2", ccoro_now_ns() + 300_000_000))
                try Coroutine.delay(.milliseconds(300))
                log.append("2")
            }
            Coroutine.launch {
                deadlines.append(("2-delay-1", ccoro_now_ns() + 150_000_000))
                try Coroutine.delay(.milliseconds(150))
                log.append("2-delay-1")
            }
            Coroutine.launch { log.append("3") }
            log.append("0")
        }
        let byDeadline = deadlines.all.sorted { $0.1 < $1.1 }.map(\.0)
        #expect(log.all == ["0", "1", "3"] + byDeadline)
        #expect(Set(byDeadline) == ["2", "2-delay-1"])
    }

    @Test("inside a coroutine, launch defaults to the coroutine's scheduler")
    func defaultSchedulerInsideCoroutine() async throws {
        try await Kit.withScheduler("launch-default-inner") { s in
            let seen = try await Coroutine.async(on: s) { () -> [String] in
                let outerThread = Kit.threadID()
                let inner = Coroutine.async { () -> [String] in
                    [CoroutineScheduler.current === s ? "same scheduler" : "other scheduler",
                     Kit.threadID() == outerThread ? "same thread" : "other thread"]
                }
                return try inner.await()
            }.value
            #expect(seen == ["same scheduler", "same thread"])
        }
    }

    @Test("inside a coroutine, the child's scheduler property is the parent's scheduler")
    func childSchedulerProperty() async throws {
        try await Kit.withScheduler("launch-default-prop") { s in
            let same = try await Coroutine.async(on: s) { () -> Bool in
                let child = Coroutine.launch {}
                try child.join()
                return child.scheduler === s
            }.value
            #expect(same)
        }
    }

    @Test("on a scheduler thread outside any coroutine, launch defaults to that scheduler")
    func defaultSchedulerOnLoop() async throws {
        try await Kit.withScheduler("launch-default-loop") { s in
            let c = try await Kit.onSchedulerLoop(s) { Coroutine.launch {} }
            try await c.join()
            #expect(c.scheduler === s)
        }
    }

    @Test("from a plain thread, launch defaults to a scheduler of the default pool",
          arguments: ["Foundation thread", "Swift task"])
    func defaultSchedulerFromPlainThread(from context: String) async throws {
        let ran = Kit.Box<CoroutineScheduler?>(nil)
        let body: @Sendable () -> Void = { ran.value = CoroutineScheduler.current }
        let c: Coroutine
        if context == "Swift task" {
            c = Coroutine.launch(body)
        } else {
            c = try await Kit.onPlainThread { Coroutine.launch(body) }
        }
        try await c.join()
        let pool = SchedulerPool.default(for: .default).schedulers
        #expect(pool.contains { $0 === c.scheduler })
        #expect(ran.value === c.scheduler)
    }

    @Test("a coroutine runs on its scheduler's thread with current set, never on the launching thread")
    func runsOnSchedulerThread() async throws {
        try await Kit.withScheduler("launch-thread") { s in
            let loopThread = try await Kit.onSchedulerLoop(s) { Kit.threadID() }
            let seen = Kit.Box<(UInt64, Bool)?>(nil)
            let launcherThread = try await Kit.onPlainThread { () -> UInt64 in
                Coroutine.launch(on: s) { seen.value = (Kit.threadID(), CoroutineScheduler.current === s) }
                return Kit.threadID()
            }
            // Wait for it through a second coroutine on s (they start in launch order).
            _ = try await Coroutine.async(on: s) {}.value
            let (thread, schedulerIsCurrent) = try #require(seen.value)
            #expect(thread == loopThread)
            #expect(thread != launcherThread)
            #expect(schedulerIsCurrent)
        }
    }

    @Test("Coroutine.current is the running coroutine, nil outside")
    func currentCoroutine() async throws {
        #expect(Coroutine.current == nil)
        #expect(CoroutineScheduler.current == nil)
        let result = try await Kit.run { () -> Bool in
            let p = Promise<Coroutine>()
            let c = Coroutine.launch {
                let me = try p.await()
                if Coroutine.current !== me { throw CoroutineError.notInCoroutine }
            }
            p.fulfill(c)
            try c.join()
            return c.error == nil && Coroutine.current?.name == "Coroutine.run"
        }
        #expect(result)
    }

    @Test("Coroutine.async fulfils with the body's value and rejects with its error")
    func asyncValueAndError() async throws {
        struct Boom: Error, Equatable {}
        try await Kit.withScheduler("launch-async") { s in
            let value = try await Coroutine.async(on: s) { 6 * 7 }.value
            #expect(value == 42)
            await #expect(throws: Boom.self) {
                try await Coroutine.async(on: s) { () -> Int in throw Boom() }.value
            }
        }
    }

    @Test("name and description identify the coroutine and its scheduler")
    func nameAndDescription() async throws {
        try await Kit.withScheduler("launch-named") { s in
            let c = Coroutine.launch(on: s, name: "worker-7") {}
            try await c.join()
            #expect(c.name == "worker-7")
            #expect(c.description.contains("worker-7"))
            #expect(c.description.contains("launch-named"))
            let anonymous = Coroutine.launch(on: s) {}
            #expect(anonymous.name == nil)
            #expect(anonymous != c)
            #expect(Set([c, anonymous, c]).count == 2)
            try await anonymous.join()
        }
    }

    @Test("isFinished and error track the body; a coroutine that returns has no error")
    func finishedState() async throws {
        try await Kit.withScheduler("launch-finished") { s in
            let gate = Promise<Void>()
            let c = Coroutine.launch(on: s) { try gate.await() }
            #expect(!c.isFinished)
            gate.fulfill(())
            try await c.join()
            #expect(c.isFinished)
            #expect(c.error == nil)
            #expect(!c.isCancelled)
        }
    }
}
