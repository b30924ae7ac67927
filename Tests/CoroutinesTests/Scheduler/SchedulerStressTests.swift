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
}
