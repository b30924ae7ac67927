import Testing
import Foundation
import Dispatch
import CoroutinesFoundation

@Suite("Coroutine.offload and BlockingPool")
struct OffloadTests {
    /// A timing test with a burst of 1,000 threads: skipped when CI sets `COROUTINES_HEAVY_TESTS=0`
    /// (the ThreadSanitizer run, where each thread start is far slower and the burst stalls the
    /// other suites); it runs in the plain `swift test`.
    @Test("while 1,000 offloaded 100 ms sleeps are pending, a 1 ms offload completes in under 200 ms and a peer keeps ticking",
          .enabled(if: ProcessInfo.processInfo.environment["COROUTINES_HEAVY_TESTS"] != "0"))
    func shortWorkIsNotStarved() async throws {
        // A latency bound measured while the rest of the suite runs in parallel on two cores:
        // the best of five attempts counts (a burst of 1,000 thread starts competes for the
        // CPU with every other test). Each attempt checks the numbers exactly.
        var attempts: [(elapsed: Duration, ticks: Int)] = []
        for _ in 0..<5 {
            let attempt = try await Self.shortWorkAttempt()
            attempts.append(attempt)
            if attempt.elapsed < .milliseconds(200) && attempt.ticks >= 5 { break }
        }
        let passed = attempts.contains { $0.elapsed < .milliseconds(200) && $0.ticks >= 5 }
        #expect(passed, "1 ms offload times and ticker counts per attempt: \(attempts)")
    }

    /// One attempt of `shortWorkIsNotStarved`: the 1 ms offload's time, and how often a ticker on
    /// the same scheduler ran while the 1,000 sleeps were pending.
    static func shortWorkAttempt() async throws -> (elapsed: Duration, ticks: Int) {
        // A pool with the default settings of its own, so that its threads end with the test.
        let pool = BlockingPool()
        #expect(pool.threadCount == 64)
        return try await Coroutine.run {
            // Given a ticker and 1,000 coroutines, each offloading a 100 ms sleep, on this scheduler
            let ticks = Counter()
            let ticker = Coroutine.launch {
                while true {
                    try Coroutine.delay(.milliseconds(2))
                    ticks.increment()
                }
            }
            let submitted = Counter()
            var sleepers: [Promise<Void>] = []
            for _ in 0..<1_000 {
                sleepers.append(Coroutine.async {
                    submitted.increment()
                    try Coroutine.offload(to: pool) { _ = usleep(100_000) }
                })
            }
            while submitted.value < 1_000 { try Coroutine.yield() }

            // When a 1 ms offload is made behind them
            let start = ContinuousClock.now
            try Coroutine.offload(to: pool) { _ = usleep(1_000) }
            let elapsed = ContinuousClock.now - start

            // Then it did not wait for the sleepers, and the ticker ran while they were pending
            for sleeper in sleepers { try sleeper.await() }
            ticker.cancel()
            return (elapsed, ticks.value)
        }
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
            try Coroutine.withTimeout(.seconds(10)) { try waiter.join() }
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
