import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

/// The armed timers of the scheduler running the calling coroutine (read on its own thread).
private func armedTimers() -> Int { Coroutine.current!.scheduler.timers.count }

/// delay and withTimeout, and that their timers are released: see the DelaysAndTimeouts article
/// (<doc:DelaysAndTimeouts>).
@Suite("Delays and timeouts")
struct CoroutineTimeoutTests {
    @Test("delay with a duration of zero or less behaves as yield")
    func delayZeroIsYield() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let a = Coroutine.launch { log.append("A1"); try Coroutine.delay(.zero); log.append("A2") }
            let b = Coroutine.launch { log.append("B1"); try Coroutine.delay(.milliseconds(-5)); log.append("B2") }
            let c = Coroutine.launch { log.append("C1"); log.append("timers \(armedTimers())") }
            try a.join()
            try b.join()
            try c.join()
            return log.all
        }
        #expect(log == ["A1", "B1", "C1", "timers 0", "A2", "B2"])
    }

    @Test("delay suspends the coroutine for at least the duration, not its thread")
    func delayDuration() async throws {
        let (elapsed, ticks) = try await Kit.run { () -> (Duration, Int) in
            let ticks = Kit.Counter()
            let ticker = Coroutine.launch {
                while Coroutine.isActive { ticks.increment(); try? Coroutine.yield() }
            }
            let start = ContinuousClock.now
            try Coroutine.delay(.milliseconds(30))
            let elapsed = ContinuousClock.now - start
            ticker.cancel()
            return (elapsed, ticks.value)
        }
        #expect(elapsed >= .milliseconds(30))
        #expect(ticks > 1)   // the thread ran another coroutine meanwhile
    }

    @Test("withTimeout interrupts the operation in progress and throws timedOut",
          arguments: SuspendingOperation.allCases.filter { $0 != .withTimeout })
    func timeoutInterrupts(_ operation: SuspendingOperation) async throws {
        let pipe = try Kit.makePipe()
        defer { close(pipe.read); close(pipe.write) }
        if operation == .waitUntilWritable { Kit.fill(pipeWriteEnd: pipe.write) }
        let (log, elapsed) = try await Kit.run { () -> ([String], Duration) in
            let log = Kit.Log<String>()
            let never = Promise<Int>()
            let target = Coroutine.launch { _ = try never.await() }
            // Timed on the scheduler's thread: a wall clock around `Kit.run` also counts the wait
            // for a cooperative-pool thread, which under ThreadSanitizer with every suite in
            // parallel exceeded 10 s on CI.
            let start = ContinuousClock.now
            do {
                try Coroutine.withTimeout(.milliseconds(20)) {
                    do {
                        switch operation {
                        case .delay: try Coroutine.delay(hangBound)
                        case .promiseAwait: _ = try never.await()
                        case .join: try target.join()
                        case .withTimeout: break
                        case .waitUntilReadable: try Coroutine.waitUntilReadable(pipe.read)
                        case .waitUntilWritable: try Coroutine.waitUntilWritable(pipe.write)
                        case .coroutineAwait: _ = try Coroutine.await { try await Task.sleep(for: hangBound) }
                        }
                        log.append("operation returned")
                    } catch {
                        log.append("operation threw \(error)")
                        throw error
                    }
                }
                log.append("withTimeout returned")
            } catch {
                log.append("withTimeout threw \(error)")
            }
            let elapsed = ContinuousClock.now - start
            log.append("timers \(armedTimers())")
            // The interrupted operation left nothing behind: the coroutine can suspend again.
            try Coroutine.delay(.milliseconds(1))
            target.cancel()
            return (log.all, elapsed)
        }
        #expect(log == ["operation threw \(CoroutineError.timedOut)", "withTimeout threw \(CoroutineError.timedOut)",
                        "timers 0"])
        #expect(elapsed >= .milliseconds(20))
        #expect(elapsed < .seconds(10))
    }

    @Test("withTimeout returns the body's value and releases its timer")
    func timeoutReturnsNormally() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            // A limit far above the 1 ms delay: a heavily loaded CI machine stalled a scheduler
            // thread for more than 300 ms once, and the timer fired before the body looked.
            let v = try Coroutine.withTimeout(.seconds(2)) { () -> Int in
                try Coroutine.delay(.milliseconds(1))
                log.append("inside: timers \(armedTimers())")
                return 5
            }
            log.append("returned \(v), timers \(armedTimers())")
            // Past the old deadline, nothing fires at this coroutine.
            try Coroutine.delay(.milliseconds(2_050))
            log.append("later delay returned")
            return log
        }
        #expect(log == ["inside: timers 1", "returned 5, timers 0", "later delay returned"])
    }

    @Test("withTimeout passes on what its body throws")
    func timeoutPassesErrors() async throws {
        struct Inner: Error {}
        let outcome = try await Kit.run { () -> String in
            do {
                try Coroutine.withTimeout(hangBound) { throw Inner() }
                return "returned"
            } catch {
                return "\(type(of: error)) timers \(armedTimers())"
            }
        }
        #expect(outcome == "Inner timers 0")
    }

    @Test("an inner timeout that expires is caught inside the outer scope, which goes on")
    func nestedInnerExpires() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let v = try Coroutine.withTimeout(hangBound) { () -> Int in
                do {
                    try Coroutine.withTimeout(.milliseconds(10)) { try Coroutine.delay(hangBound) }
                } catch CoroutineError.timedOut {
                    log.append("inner timed out")
                }
                try Coroutine.delay(.milliseconds(1))
                log.append("outer body goes on, timers \(armedTimers())")
                return 1
            }
            log.append("outer returned \(v), timers \(armedTimers())")
            return log
        }
        #expect(log == ["inner timed out", "outer body goes on, timers 1", "outer returned 1, timers 0"])
    }

    @Test("an outer timeout that expires interrupts an inner scope with a longer limit")
    func nestedOuterExpires() async throws {
        let (log, elapsed) = try await Kit.run { () -> ([String], Duration) in
            var log: [String] = []
            let start = ContinuousClock.now   // timed on the scheduler's thread, as above
            do {
                try Coroutine.withTimeout(.milliseconds(20)) {
                    try Coroutine.withTimeout(hangBound) { try Coroutine.delay(hangBound) }
                    log.append("after inner")
                }
            } catch {
                log.append("outer threw \(error), timers \(armedTimers())")
            }
            return (log, ContinuousClock.now - start)
        }
        #expect(log == ["outer threw \(CoroutineError.timedOut), timers 0"])
        #expect(elapsed < .seconds(10))
    }

    /// Guards an invariant (a coroutine counts its expired timeout scopes).
    @Test("nested withTimeout: inner expiry swallowed, outer keeps suspending; the count returns to zero")
    func nestedTimeoutSwallowed() async throws {
        let results = try await Kit.run { () -> [String] in
            var log: [String] = []
            let c = Coroutine.current!
            let v: Int = try Coroutine.withTimeout(hangBound) {
                do {
                    _ = try Coroutine.withTimeout(.zero) { () -> Int in
                        do { try Coroutine.delay(hangBound) } catch CoroutineError.timedOut { log.append("inner op timed out") }
                        return 1
                    }
                } catch CoroutineError.timedOut {
                    log.append("inner scope timed out")
                }
                log.append("count after inner \(c.expiredTimeoutScopes)")
                try Coroutine.delay(.milliseconds(1))   // must not time out
                try Coroutine.yield()
                return 7
            }
            log.append("v \(v) count \(c.expiredTimeoutScopes)")
            // A scope whose timer fires: removed after the body ended.
            do {
                try Coroutine.withTimeout(.milliseconds(2)) { try Coroutine.delay(hangBound) }
            } catch CoroutineError.timedOut { log.append("timer scope timed out") }
            log.append("count \(c.expiredTimeoutScopes)")
            // A scope that ends before its timer: the timer must never fire later.
            _ = try Coroutine.withTimeout(.milliseconds(2)) { 1 }
            try Coroutine.delay(.milliseconds(10))
            log.append("late timer ignored, count \(c.expiredTimeoutScopes)")
            // Both scopes expire.
            do {
                try Coroutine.withTimeout(.milliseconds(1)) {
                    try Coroutine.withTimeout(.zero) {
                        do { try Coroutine.delay(hangBound) } catch {}
                        try Coroutine.delay(.milliseconds(5))   // still expired: throws
                    }
                }
            } catch CoroutineError.timedOut { log.append("both timed out") }
            log.append("final count \(c.expiredTimeoutScopes)")
            try Coroutine.delay(.milliseconds(1))
            return log
        }
        #expect(results == [
            "inner op timed out", "inner scope timed out", "count after inner 0", "v 7 count 0",
            "timer scope timed out", "count 0", "late timer ignored, count 0", "both timed out", "final count 0",
        ])
    }

    /// Guards an invariant (a coroutine counts its expired timeout scopes).
    @Test("outer scope expires while an inner one runs: the inner rethrows, the outer reports, count back to zero")
    func outerExpiresDuringInner() async throws {
        let (outcome, count) = try await Kit.run { () -> (String, Int) in
            let c = Coroutine.current!
            do {
                try Coroutine.withTimeout(.milliseconds(2)) {
                    try Coroutine.withTimeout(hangBound) { try Coroutine.delay(hangBound) }
                }
                return ("returned", c.expiredTimeoutScopes)
            } catch CoroutineError.timedOut {
                try Coroutine.delay(.milliseconds(1))
                return ("timedOut", c.expiredTimeoutScopes)
            }
        }
        #expect(outcome == "timedOut")
        #expect(count == 0)
    }

    @Test("an expired timeout keeps interrupting later suspending calls until its scope ends")
    func expiredScopeKeepsInterrupting() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            do {
                try Coroutine.withTimeout(.milliseconds(10)) {
                    do { try Coroutine.delay(hangBound) } catch { log.append("first delay threw") }
                    do { try Coroutine.yield(); log.append("yield returned") } catch { log.append("yield threw") }
                    try Coroutine.delay(.milliseconds(1))
                    log.append("second delay returned")
                }
            } catch CoroutineError.timedOut {
                log.append("withTimeout threw timedOut")
            }
            try Coroutine.delay(.milliseconds(1))
            log.append("outside the scope delay works")
            return log
        }
        #expect(log == ["first delay threw", "yield threw", "withTimeout threw timedOut", "outside the scope delay works"])
    }

    @Test("withTimeout with a duration of zero times out at the first suspending call")
    func zeroTimeout() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            do {
                try Coroutine.withTimeout(.zero) {
                    log.append("body runs")
                    try Coroutine.delay(hangBound)
                }
            } catch {
                log.append("\(error)")
            }
            return log
        }
        #expect(log == ["body runs", "\(CoroutineError.timedOut)"])
    }

    /// A regression test: it failed before its fix.
    @Test("withTimeout with zero duration times out the first suspending call, even a yield")
    func zeroTimeoutTimesOutFirstSuspension() async throws {
        let outcomes = try await Kit.run {
            var outcomes: [String] = []
            for d in [Duration.zero, .milliseconds(-5)] {
                do {
                    _ = try Coroutine.withTimeout(d) { try Coroutine.yield(); return 1 }
                    outcomes.append("returned")
                } catch CoroutineError.timedOut {
                    outcomes.append("timedOut")
                }
            }
            return outcomes
        }
        #expect(outcomes == ["timedOut", "timedOut"])
    }

    @Test("100,000 finished, cancelled and timed-out delays leave no armed timer")
    func manyDelaysLeaveNoTimer() async throws {
        let report = try await Kit.run { () -> [String] in
            var report: [String] = []
            // Given 40,000 delays that run to completion.
            for _ in 0..<40_000 { try Coroutine.delay(.nanoseconds(1)) }
            report.append("after finished: \(armedTimers())")
            // And 50,000 delays cancelled while armed, 1,000 at a time.
            for batch in 0..<50 {
                let sleepers = (0..<1_000).map { _ in
                    Coroutine.launch(stackSize: 16 * 1024) { try Coroutine.delay(.seconds(3600)) }
                }
                try Coroutine.yield()   // every sleeper has armed its timer
                if batch == 0 { report.append("armed: \(armedTimers())") }
                for s in sleepers { s.cancel() }
                for s in sleepers { try s.join() }
            }
            report.append("after cancelled: \(armedTimers())")
            // And 10,000 delays interrupted by a timeout (two timers each).
            for _ in 0..<10_000 {
                do { try Coroutine.withTimeout(.nanoseconds(1)) { try Coroutine.delay(.seconds(3600)) } } catch CoroutineError.timedOut {}
            }
            // Then no timer is left armed.
            report.append("at the end: \(armedTimers())")
            return report
        }
        #expect(report == ["after finished: 0", "armed: 1000", "after cancelled: 0", "at the end: 0"])
    }
}
