import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias Tally = CoroutineTestKit.Tally

/// Schedulers stopped while other threads launch, cancel and wake: every coroutine finishes once,
/// every body is released once, every loop ends (<doc:BlockingAndStopping>).
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("Schedulers stopped under races", .serialized)
struct SchedulerStressTests {
    /// Found in review 10 (the run queue holds no references to its coroutines).
    @Test("unstarted coroutines cancelled while queued, then the scheduler stopped: each finishes once and is freed")
    func unstartedCancelledThenStopped() async throws {
        for round in 0..<10 {
            let weak = Kit.WeakCoroutines()
            let released = Kit.Counter()
            let s = CoroutineScheduler(name: "r10-stop-\(round)")
            let started = Promise<Void>()
            // A coroutine that keeps the run queue busy until the stop.
            weak.add(Coroutine.launch(on: s) {
                started.fulfill(())
                while true { try Coroutine.yield() }
            })
            try await started.value
            try await Kit.onPlainThreads(2) { k in
                for i in 0..<200 {
                    let t = Kit.Tracker(released)
                    let c = Coroutine.launch(on: s) {
                        _ = t
                        // Launch a child onto this scheduler (queued unstarted) and cancel it.
                        let child = Coroutine.launch { _ = t; try Coroutine.yield() }
                        if i % 2 == 0 { child.cancel() }
                        try Coroutine.yield()
                    }
                    if (i + k) % 3 == 0 { c.cancel() }
                    weak.add(c)
                }
            }
            s.stop()
            #expect(await Kit.eventually { s.isStopped })
            #expect(released.value == 400)
            #expect(weak.alive == 0)
        }
    }

    /// Found in review 11 (a coroutine that never runs borrows its scheduler and tells its
    /// unretained observers, a promise, channel or mailbox, exactly once).
    @Test("launches from two threads race a stop: every promise, channel and actor of a coroutine that never ran is told exactly once")
    func launchesRaceStop() async throws {
        for round in 0..<8 {
            let s = CoroutineScheduler(name: "r11-race-stop-\(round)")
            let released = Kit.Counter()
            let ran = Kit.Counter()
            let results = Kit.Log<String>()
            let perThread = 150
            let go = Atomic<Int>(0)
            try await Kit.onPlainThreads(3) { t in
                _ = go.wrappingAdd(1, ordering: .relaxed)
                while go.load(ordering: .relaxed) < 3 {}
                if t == 2 {
                    for _ in 0..<(round * 500) { _ = Kit.opaque(0) }
                    s.stop()
                    return
                }
                for i in 0..<perThread {
                    let tr = Kit.Tracker(released)
                    switch i % 3 {
                    case 0:
                        let p = Coroutine.async(on: s) { () -> Int in _ = tr; ran.increment(); return i }
                        let r: Result<Int, any Error>
                        do { r = .success(try Coroutine.runBlocking { try p.await() }) } catch { r = .failure(error) }
                        results.append("async " + Kit.describe(r))
                    case 1:
                        let ch = Coroutine.produce(on: s) { (out: Channel<Int>) in _ = tr; ran.increment(); try out.send(i) }
                        let r: Result<Int, any Error>
                        do { r = .success(try Coroutine.runBlocking { try ch.receive() }) } catch { r = .failure(error) }
                        results.append("produce " + Kit.describe(r))
                    default:
                        let a = CoroutineActor<Int, Int>(on: s) { mailbox in _ = tr; ran.increment(); for e in mailbox { e.reply(e.message) } }
                        let reply = a.send(i)
                        let r: Result<Int, any Error>
                        do { r = .success(try Coroutine.runBlocking { try reply.await() }) } catch { r = .failure(error) }
                        results.append("actor " + (r.isSuccess ? "value" : "failed"))
                    }
                }
            }
            let all = results.all
            #expect(all.count == 2 * perThread)
            // A coroutine that ran gives its value (or is cancelled by the stop); one that never ran
            // reports the stop (or the cancellation of a main-style start).
            let unexpected = all.filter {
                !($0.hasPrefix("async value") || $0.hasPrefix("produce value") || $0 == "actor value"
                  || $0.hasSuffix("stopped") || $0.hasSuffix("cancelled") || $0 == "actor failed")
            }
            #expect(unexpected.isEmpty, "round \(round): \(unexpected.prefix(5))")
            #expect(await Kit.eventually { s.isStopped })
            #expect(await Kit.eventually { released.value == 2 * perThread }, "round \(round): \(released.value) released")
        }
    }

    /// Found in review 12 (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
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
            let d = Kit.describe(p.result)
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
}

extension Result {
    fileprivate var isSuccess: Bool { if case .success = self { true } else { false } }
}
