import Testing
import Foundation
import Dispatch
import CoroutinesFoundation
import CoroutinesTestSupport

@Suite("Coroutine.offload and BlockingPool")
struct OffloadTests {
    /// A burst of 1,000 threads: skipped when heavy tests are off (``TestEnvironment``: a
    /// sanitizer build such as CI's ThreadSanitizer run, where each thread start is far slower);
    /// it runs in the plain `swift test`.
    ///
    /// What it asserts is order, not time: the 1,000 long offloads block on a gate that opens
    /// only after the short offload has returned and the ticker has ticked five times since. So
    /// the short job finished while every long job was still pending, and the scheduler went on
    /// running other coroutines meanwhile. The bugs it was written for both break that order: a
    /// pool that queues the short job behind the long ones (a fixed-size FIFO of 64 threads)
    /// cannot run it until a long job ends, and an offload that blocks its scheduler stops the
    /// ticker. Each long job waits at most 60 s for the gate; a job released by that limit
    /// instead of the gate is counted, so either bug fails the test (after about a minute)
    /// instead of hanging it. (An earlier version timed the short offload against 200 ms and
    /// failed on a loaded two-core machine although nothing was wrong.)
    @Test("while 1,000 offloaded jobs are blocked, a short offload completes and a peer coroutine keeps ticking",
          .enabled(if: TestEnvironment.heavyTestsEnabled))
    func shortWorkIsNotStarved() async throws {
        // A pool with the default settings of its own, so that its threads end with the test.
        let pool = BlockingPool()
        #expect(pool.threadCount == 64)
        let gate = DispatchSemaphore(value: 0)
        let longJobs = 1_000
        let (finishedBeforeShort, releasedByLimit, ticksWhilePending) = try await Coroutine.run { () -> (Int, Int, Int) in
            // Given a ticker and 1,000 coroutines, each offloading a job that waits for the gate
            let ticks = Counter()
            let ticker = Coroutine.launch {
                while true {
                    try Coroutine.delay(.milliseconds(2))
                    ticks.increment()
                }
            }
            let submitted = Counter(), finished = Counter(), releasedByLimit = Counter()
            var longOnes: [Promise<Void>] = []
            for _ in 0..<longJobs {
                longOnes.append(Coroutine.async {
                    submitted.increment()
                    try Coroutine.offload(to: pool) {
                        if gate.wait(timeout: .now() + hangBoundInterval) == .timedOut { releasedByLimit.increment() }
                        finished.increment()
                    }
                })
            }
            while submitted.value < longJobs { try Coroutine.yield() }

            // When a short offload is made behind them
            try Coroutine.offload(to: pool) { _ = usleep(1_000) }

            // Then it returned while every long job was still blocked, and the ticker goes on
            let finishedBeforeShort = finished.value
            let ticksAtShort = ticks.value
            while ticks.value < ticksAtShort + 5 { try Coroutine.delay(.milliseconds(1)) }
            let ticksWhilePending = ticks.value - ticksAtShort
            let finishedWhileTicking = finished.value
            for _ in 0..<longJobs { gate.signal() }
            for job in longOnes { try job.await() }
            ticker.cancel()
            return (max(finishedBeforeShort, finishedWhileTicking), releasedByLimit.value, ticksWhilePending)
        }
        #expect(finishedBeforeShort == 0, "long jobs finished before the gate opened: the short one waited for them")
        #expect(releasedByLimit == 0, "long jobs released by their 60 s limit: the short offload or the ticker waited for them")
        #expect(ticksWhilePending >= 5)
    }

    @Test("the body runs on a pool thread outside any coroutine and its value and error come back")
    func valueAndError() async throws {
        struct Failure: Error, Equatable {}
        let (onPool, value, error) = try await Coroutine.run {
            let onPool = try Coroutine.offload { Coroutine.current == nil && CoroutineScheduler.current == nil }
            let value = try Coroutine.offload { 6 * 7 }
            let error: (any Error)?
            do { try Coroutine.offload { throw Failure() }; error = nil } catch let e { error = e }
            return (onPool, value, error)
        }
        #expect(onPool)
        #expect(value == 42)
        #expect(error as? Failure == Failure())
    }

    @Test("outside a coroutine it runs inline on a plain thread and throws notInCoroutine on a scheduler thread")
    func outsideACoroutine() async throws {
        let thread = pthread_self()
        let inline = try Coroutine.offload { pthread_equal(pthread_self(), thread) != 0 }
        #expect(inline)
        let observed = try await Coroutine.run {
            // A promise observer runs on a scheduler thread outside any coroutine (see the Promises
            // article, <doc:Promises>).
            let derived = Promise<Int>.fulfilled(1).then { _ in try Coroutine.offload { 2 } }
            do { _ = try derived.await(); return nil as CoroutineError? } catch let e as CoroutineError { return e }
        }
        #expect(observed == .notInCoroutine)
    }

    @Test("cancelling the waiting coroutine throws CancellationError at once while the body runs on")
    func cancellationDoesNotWaitForTheBody() async throws {
        let gate = DispatchSemaphore(value: 0)
        let bodyFinished = Promise<Void>()
        let (error, finishedEarly) = try await Coroutine.run {
            // Given a coroutine waiting for an offloaded body that blocks on a gate
            let started = Promise<Void>()
            let waiter = Coroutine.launch {
                _ = try Coroutine.offload {
                    started.fulfill(())
                    gate.wait()
                    bodyFinished.fulfill(())
                    return 1
                }
            }
            try started.await()
            // When the coroutine is cancelled
            waiter.cancel()
            try Coroutine.withTimeout(hangBound) { try waiter.join() }
            // Then it ended before the body did
            let finishedEarly = bodyFinished.isPending
            gate.signal()
            try bodyFinished.await()
            return (waiter.error, finishedEarly)
        }
        #expect(error is CancellationError)
        #expect(finishedEarly)
    }

    @Test("withTimeout ends the wait with timedOut; dumpAll shows the coroutine waiting in offload")
    func timeoutAndDiagnostics() async throws {
        let gate = DispatchSemaphore(value: 0)
        let (timedOut, dump) = try await Coroutine.run {
            let started = Promise<Void>()
            let waiter = Coroutine.launch(name: "offload-waiter") {
                try Coroutine.offload { started.fulfill(()); gate.wait() }
            }
            try started.await()
            let dump = Coroutine.dumpAll()
            gate.signal()
            try waiter.join()
            var timedOut = false
            do {
                try Coroutine.withTimeout(.milliseconds(20)) { try Coroutine.offload { gate.wait() } }
            } catch CoroutineError.timedOut {
                timedOut = true
            }
            gate.signal()
            return (timedOut, dump)
        }
        #expect(timedOut)
        #expect(dump.contains("'offload-waiter'") && dump.contains("waiting in Coroutine.offload"), "\(dump)")
    }

    @Test("a coroutine already cancelled never runs the body")
    func cancelledBeforeTheCall() async throws {
        let ran = Counter()
        let thrown = try await Coroutine.run {
            Coroutine.current?.cancel()
            do { try Coroutine.offload { ran.increment() }; return false } catch is CancellationError { return true }
        }
        #expect(thrown)
        #expect(ran.value == 0)
    }

    @Test("a pool starts threads lazily, and beyond its ceiling jobs wait for a free thread")
    func lazyThreadsAndCeiling() async throws {
        let pool = BlockingPool(threadCount: 1, maxThreadCount: 2)
        #expect(pool.liveThreadCount == 0)
        let order = try await Coroutine.run {
            let gate = DispatchSemaphore(value: 0)
            let order = Box<[Int]>([])
            let blocked = Counter()
            // Two jobs hold both threads; a third and fourth must wait for them.
            let holders = (0..<2).map { _ in
                Coroutine.async { try Coroutine.offload(to: pool) { blocked.increment(); gate.wait() } }
            }
            while blocked.value < 2 { try Coroutine.yield() }
            let queued = (3...4).map { n in
                Coroutine.async { try Coroutine.offload(to: pool) { order.update { $0.append(n) } } }
            }
            try Coroutine.yield()
            #expect(pool.liveThreadCount == 2)
            #expect(order.value.isEmpty)
            gate.signal()
            gate.signal()
            for p in holders + queued { try p.await() }
            return order.value
        }
        #expect(Set(order) == [3, 4])
    }
}
