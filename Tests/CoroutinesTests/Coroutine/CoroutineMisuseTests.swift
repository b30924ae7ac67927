import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

/// Where a suspending call can be made outside any coroutine.
enum NonCoroutineContext: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case swiftTask = "a Swift task"
    case foundationThread = "a plain Foundation thread"
    case schedulerLoop = "a scheduler's thread, outside any coroutine"

    var testDescription: String { rawValue }
}

/// Attempts every suspending operation and reports how each ended. Synchronous, so that the
/// synchronous overloads are chosen (`join()`, not `join() async`).
/// The calls are timed where they run ("at once" means well under the 30 s they would suspend
/// for), so that waiting for a thread to run on does not count.
private func attemptSuspendingCalls(joining target: Coroutine, pipe: (read: Int32, write: Int32)) -> [String] {
    var outcomes: [String] = []
    let start = ContinuousClock.now
    func attempt(_ label: String, _ op: () throws -> Void) {
        do {
            try op()
            outcomes.append("\(label): returned")
        } catch let e as CoroutineError {
            outcomes.append("\(label): \(e == .notInCoroutine ? "notInCoroutine" : "\(e)")")
        } catch {
            outcomes.append("\(label): \(error)")
        }
    }
    let never = Promise<Int>()
    var timeoutBodyRan = false
    attempt("delay") { try Coroutine.delay(hangBound) }
    attempt("delay(0)") { try Coroutine.delay(.zero) }
    attempt("yield") { try Coroutine.yield() }
    attempt("withTimeout") { try Coroutine.withTimeout(hangBound) { timeoutBodyRan = true } }
    attempt("join") { try target.join() }
    attempt("waitUntilReadable") { try Coroutine.waitUntilReadable(pipe.read) }
    attempt("waitUntilWritable") { try Coroutine.waitUntilWritable(pipe.write) }
    attempt("Coroutine.await") { _ = try Coroutine.await { try await Task.sleep(for: hangBound) } }
    attempt("promise.await") { _ = try never.await() }
    attempt("fulfilled promise.await") { _ = try Promise.fulfilled(1).await() }
    if timeoutBodyRan { outcomes.append("withTimeout ran its body") }
    let elapsed = ContinuousClock.now - start
    if elapsed >= .seconds(10) { outcomes.append("the calls took \(elapsed)") }
    return outcomes
}

/// Misuse is reported with errors, never crashes or blocks: see the BadInputAndMisuse and
/// BlockingAndStopping articles (<doc:BadInputAndMisuse>, <doc:BlockingAndStopping>).
@Suite("Misuse of coroutine operations")
struct CoroutineMisuseTests {
    @Test("every suspending call outside a coroutine throws notInCoroutine at once",
          arguments: NonCoroutineContext.allCases)
    func notInCoroutine(in context: NonCoroutineContext) async throws {
        try await Kit.withScheduler("misuse-outside") { s in
            let pipe = try Kit.makePipe()
            defer { close(pipe.read); close(pipe.write) }
            let gate = Promise<Void>()
            let target = Coroutine.launch(on: s) { try gate.await() }
            defer { gate.fulfill(()) }
            let outcomes: [String]
            switch context {
            case .swiftTask: outcomes = attemptSuspendingCalls(joining: target, pipe: pipe)
            case .foundationThread: outcomes = try await Kit.onPlainThread { attemptSuspendingCalls(joining: target, pipe: pipe) }
            case .schedulerLoop: outcomes = try await Kit.onSchedulerLoop(s) { attemptSuspendingCalls(joining: target, pipe: pipe) }
            }
            #expect(outcomes == [
                "delay: notInCoroutine", "delay(0): notInCoroutine", "yield: notInCoroutine",
                "withTimeout: notInCoroutine", "join: notInCoroutine", "waitUntilReadable: notInCoroutine",
                "waitUntilWritable: notInCoroutine", "Coroutine.await: notInCoroutine",
                "promise.await: notInCoroutine", "fulfilled promise.await: notInCoroutine",
            ])
        }
    }

    @Test("joining yourself throws joinSelf")
    func joinSelf() async throws {
        let outcome = try await Kit.run { () -> String in
            do { try Coroutine.current!.join(); return "returned" } catch { return "\(error)" }
        }
        #expect(outcome == "\(CoroutineError.joinSelf)")
        try await Kit.withScheduler("misuse-join-self") { s in
            let c = Coroutine.launch(on: s) { try Coroutine.current!.join() }
            try await c.join()
            #expect(c.error as? CoroutineError == .joinSelf)
        }
    }

    // MARK: runBlocking

    @Test("runBlocking inside a coroutine throws nestedRunBlocking")
    func runBlockingInsideCoroutine() async throws {
        let outcome = try await Kit.run { () -> String in
            do { return "returned \(try Coroutine.runBlocking { 1 })" } catch { return "\(error)" }
        }
        #expect(outcome == "\(CoroutineError.nestedRunBlocking)")
    }

    @Test("runBlocking inside runBlocking on a plain thread throws nestedRunBlocking, and the outer one still works")
    func runBlockingNestedOnPlainThread() async throws {
        let outcome = try await Kit.onPlainThread { () -> String in
            do {
                let v = try Coroutine.runBlocking { () -> Int in
                    do { _ = try Coroutine.runBlocking { 1 }; return -1 } catch CoroutineError.nestedRunBlocking { return 2 }
                }
                return "outer returned \(v)"
            } catch {
                return "outer threw \(error)"
            }
        }
        #expect(outcome == "outer returned 2")
    }

    @Test("runBlocking on a scheduler's thread outside any coroutine throws nestedRunBlocking")
    func runBlockingOnSchedulerThread() async throws {
        try await Kit.withScheduler("misuse-runblocking-loop") { s in
            let outcome = try await Kit.onSchedulerLoop(s) { () -> String in
                do { return "returned \(try Coroutine.runBlocking { 1 })" } catch { return "\(error)" }
            }
            #expect(outcome == "\(CoroutineError.nestedRunBlocking)")
        }
    }

    @Test("runBlocking on a Swift concurrency thread throws blockingCooperativeThread")
    func runBlockingOnCooperativeThread() async throws {
        // A synchronous helper, so the call is made (and checked) at run time on the task's thread.
        func callRunBlocking() throws -> Int { try Coroutine.runBlocking { 1 } }
        #expect(throws: CoroutineError.blockingCooperativeThread) { try callRunBlocking() }
        let detached = Task.detached { () -> String in
            do { return "returned \(try callRunBlocking())" } catch { return "\(error)" }
        }
        #expect(await detached.value == "\(CoroutineError.blockingCooperativeThread)")
    }

    @Test("runBlocking on a plain thread returns the body's value after every coroutine launched in it finished")
    func runBlockingWaitsForLaunched() async throws {
        let (value, appended, threadsMatch) = try await Kit.onPlainThread { () -> (Int, [Int], Bool) in
            let log = Kit.Log<Int>()
            let me = Kit.threadID()
            let onMyThread = Kit.Counter()
            let v = try Coroutine.runBlocking { () -> Int in
                for i in 1...3 {
                    Coroutine.launch {
                        try Coroutine.delay(.milliseconds(10 * i))
                        if Kit.threadID() == me { onMyThread.increment() }
                        log.append(i)
                    }
                }
                return 42
            }
            return (v, log.all, onMyThread.value == 3)
        }
        #expect(value == 42)
        #expect(appended == [1, 2, 3])
        #expect(threadsMatch)
    }

    @Test("runBlocking can be used again on the same thread")
    func runBlockingTwice() async throws {
        let values = try await Kit.onPlainThread { () -> [Int] in
            let a = try Coroutine.runBlocking { () -> Int in try Coroutine.delay(.milliseconds(1)); return 1 }
            let b = try Coroutine.runBlocking { () -> Int in try Coroutine.yield(); return 2 }
            return [a, b]
        }
        #expect(values == [1, 2])
        #expect(CoroutineScheduler.current == nil)
    }

    @Test("runBlocking whose body throws cancels the other coroutines, waits for them, and rethrows")
    func runBlockingBodyThrows() async throws {
        struct BodyFailed: Error, Equatable {}
        let scheduler = Kit.Box<CoroutineScheduler?>(nil)
        let watchdog = Kit.startWatchdog(limit: .seconds(30), "runBlocking", waking: scheduler)
        defer { watchdog.cancel() }
        let (outcome, log) = try await Kit.onPlainThread { () -> (String, [String]) in
            let log = Kit.Log<String>()
            do {
                _ = try Coroutine.runBlocking { () -> Int in
                    scheduler.value = Coroutine.current?.scheduler
                    for i in 1...3 {
                        Coroutine.launch {
                            defer { log.append("c\(i) unwound") }
                            do { try Coroutine.delay(hangBound) } catch {
                                log.append("c\(i) \(type(of: error))")
                                throw error
                            }
                        }
                    }
                    try Coroutine.yield()   // all three are suspended in delay now
                    throw BodyFailed()
                }
                return ("returned", log.all)
            } catch {
                return ("\(type(of: error))", log.all)
            }
        }
        #expect(outcome == "BodyFailed")
        // Cancellation order among the three is not specified; each was cancelled, then unwound.
        #expect(log.count == 6)
        for i in 1...3 {
            let cancelled = log.firstIndex(of: "c\(i) CancellationError")
            let unwound = log.firstIndex(of: "c\(i) unwound")
            #expect(cancelled != nil && unwound != nil && cancelled! < unwound!)
        }
    }

    @Test("runBlocking whose body throws, with nothing else launched, rethrows at once")
    func runBlockingBodyThrowsAlone() async throws {
        struct BodyFailed: Error {}
        let scheduler = Kit.Box<CoroutineScheduler?>(nil)
        let watchdog = Kit.startWatchdog(limit: .seconds(30), "runBlocking", waking: scheduler)
        defer { watchdog.cancel() }
        let outcome = try await Kit.onPlainThread { () -> String in
            do {
                _ = try Coroutine.runBlocking { () -> Int in
                    scheduler.value = Coroutine.current?.scheduler
                    throw BodyFailed()
                }
                return "returned"
            } catch {
                return "\(type(of: error))"
            }
        }
        #expect(outcome == "BodyFailed")
    }

    // MARK: Coroutine.run

    @Test("Coroutine.run returns the body's value and rethrows its error")
    func runValueAndError() async throws {
        struct Failed: Error, Equatable { let n: Int }
        let v = try await Kit.run { () -> String in
            try Coroutine.delay(.milliseconds(1))
            return "value"
        }
        #expect(v == "value")
        await #expect(throws: Failed(n: 3)) {
            try await Kit.run { () -> Int in
                try Coroutine.yield()
                throw Failed(n: 3)
            }
        }
    }

    @Test("Coroutine.run waits for the coroutines launched in it and cancels them when the body throws")
    func runWaitsAndCancels() async throws {
        struct Failed: Error {}
        let log = Kit.Log<String>()
        try await Kit.run {
            _ = Coroutine.launch { try Coroutine.delay(.milliseconds(20)); log.append("late child") }
        }
        #expect(log.all == ["late child"])
        await #expect(throws: Failed.self) {
            try await Kit.run {
                Coroutine.launch {
                    defer { log.append("unwound") }
                    try Coroutine.delay(hangBound)
                }
                try Coroutine.yield()
                throw Failed()
            }
        }
        #expect(log.all == ["late child", "unwound"])
    }

    @Test("cancelling the task awaiting Coroutine.run cancels its body")
    func runCancelledByTask() async throws {
        let started = Promise<Void>()
        let delayThrew = Kit.Log<String>()
        // The delay (90 s) outlasts the watchdog's limit: if the cancellation only took effect
        // when the delay ended, the watchdog records an issue at 60 s and the delay returns
        // without throwing, so the test fails without hanging the run for long. (No wall clock here:
        // waiting for a cooperative-pool thread under ThreadSanitizer took over 10 s on CI.)
        let task = Task {
            try await Kit.run {
                started.fulfill(())
                do { try Coroutine.delay(.seconds(90)) } catch {
                    delayThrew.append("\(type(of: error))")
                    throw error
                }
            }
        }
        try await started.value
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(delayThrew.all == ["CancellationError"])
    }
}
