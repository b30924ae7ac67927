import Foundation
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// `Coroutine.async` from a coroutine onto its own scheduler queues a `PendingLaunch`: the
/// coroutine object is created when the launch reaches the head of the run queue. Everything a
/// user can see must be as if it had been created at launch: start order, cancellation by the
/// promise and by the parent, stop, `dumpAll`, lifetimes.
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
                    try Coroutine.delay(.seconds(60))
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
            await #expect(throws: CancellationError.self) { try await p.timeout(.seconds(20)).value }
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
}
