import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

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
}

extension Result {
    fileprivate var isSuccess: Bool { if case .success = self { true } else { false } }
}
