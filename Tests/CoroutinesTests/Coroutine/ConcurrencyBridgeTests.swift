@testable import Coroutines
import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

// `promise.value`, `coroutine.join() async`, `Coroutine.await { … }` (see the
// CoroutinesAndSwiftConcurrency article, <doc:CoroutinesAndSwiftConcurrency>), and the rule that
// suspending calls outside a coroutine throw `notInCoroutine` (<doc:BadInputAndMisuse>). Helpers
// live in Support/PromiseTestKit.swift.

@Suite("Promise.value from async code")
struct PromiseValueBridgeTests {
    @Test("value returns what a coroutine fulfils later")
    func valueReturnsLaterFulfilment() async throws {
        try await withTestScheduler { s throws in
            let p = Promise<String>()
            Coroutine.launch(on: s) {
                try Coroutine.delay(.milliseconds(2))
                p.fulfill("done")
            }
            #expect(try await p.value == "done")
        }
    }

    @Test("value throws the rejection error, for a promise settled before or after the call")
    func valueThrowsRejection() async throws {
        await #expect(throws: PromiseTestError.boom) { try await Promise<Int>.rejected(PromiseTestError.boom).value }
        #expect(try await Promise<Int>.fulfilled(3).value == 3)
        let p = Promise<Int>()
        DispatchQueue.global().async { p.reject(PromiseTestError.other) }
        await #expect(throws: PromiseTestError.other) { try await p.value }
    }

    @Test("value of Coroutine.async is the body's result")
    func valueOfAsyncCoroutine() async throws {
        #expect(try await Coroutine.async { try Coroutine.delay(.milliseconds(1)); return 40 + 2 }.value == 42)
    }

    @Test("cancelling the awaiting task removes its waiter and throws CancellationError; the promise stays pending")
    func cancellingValueTask() async throws {
        // Given a task awaiting a pending promise, with its waiter registered
        let p = Promise<Int>()
        let task = Task { try await p.value }
        try await waitUntil("the task's waiter is registered") { p.testWaiterCount == 1 }
        // When the task is cancelled
        task.cancel()
        // Then it throws CancellationError, its waiter is gone and the promise is still pending
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(p.testWaiterCount == 0)
        #expect(p.isPending)
        // And a later fulfilment (which would resume a leftover continuation twice) reaches a new awaiter
        p.fulfill(5)
        #expect(try await p.value == 5)
    }

    @Test("a task cancelled before it awaits throws CancellationError at once")
    func valueInCancelledTask() async throws {
        let p = Promise<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await p.value
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(p.testWaiterCount == 0)
        #expect(p.isPending)
    }

    @Test("many tasks awaiting one promise all get the value; cancelled ones leave no waiter")
    func manyTasksAwaitOnePromise() async throws {
        // Given 20 tasks awaiting one promise
        let p = Promise<Int>()
        let tasks = (0..<20).map { _ in Task { try await p.value } }
        try await waitUntil("all 20 waiters are registered") { p.testWaiterCount == 20 }
        // When every other one is cancelled and then the promise is fulfilled
        for (i, t) in tasks.enumerated() where i.isMultiple(of: 2) { t.cancel() }
        try await waitUntil("the cancelled waiters are removed") { p.testWaiterCount == 10 }
        p.fulfill(1)
        // Then the cancelled ones threw and the rest got the value
        var got = 0
        var cancelled = 0
        for t in tasks {
            do { got += try await t.value } catch is CancellationError { cancelled += 1 }
        }
        #expect(got == 10)
        #expect(cancelled == 10)
    }
}

@Suite("Coroutine.join() async")
struct JoinBridgeTests {
    @Test("join() async returns once the coroutine finished, without rethrowing its error")
    func joinAsyncReturnsAfterFinish() async throws {
        try await withTestScheduler { s in
            // Given a coroutine that throws once released, and a task joining it
            let release = Promise<Void>()
            let c = Coroutine.launch(on: s) {
                try release.await()
                throw PromiseTestError.boom
            }
            let joiner = Task { try await c.join() }
            try await waitUntil("the task is joining") { c.withShared { $0.joiners.count } == 1 }
            #expect(!c.isFinished)
            // When it is released
            release.fulfill(())
            // Then join returns normally and the error is readable
            try await joiner.value
            #expect(c.isFinished)
            #expect(c.error as? PromiseTestError == .boom)
        }
    }

    @Test("join() async on a finished coroutine returns at once")
    func joinAsyncOnFinished() async throws {
        try await withTestScheduler { s in
            let c = Coroutine.launch(on: s) {}
            try await c.join()
            try await c.join()
            #expect(c.isFinished)
        }
    }

    @Test("cancelling a task in join() async removes its waiter and throws CancellationError; the coroutine is not cancelled")
    func cancellingJoinTask() async throws {
        try await withTestScheduler { s in
            // Given a task joining a suspended coroutine
            let release = Promise<Int>()
            let c = Coroutine.launch(on: s) { _ = try release.await() }
            let joiner = Task { try await c.join() }
            try await waitUntil("the task is joining") { c.withShared { $0.joiners.count } == 1 }
            // When the task is cancelled
            joiner.cancel()
            // Then it throws, its waiter is gone and the coroutine goes on
            await #expect(throws: CancellationError.self) { try await joiner.value }
            #expect(c.withShared { $0.joiners.count } == 0)
            #expect(!c.isCancelled)
            #expect(!c.isFinished)
            release.fulfill(1)
            try await c.join()
            #expect(c.error == nil)
        }
    }
}

@Suite("Coroutine.await { async }")
struct CoroutineAwaitBridgeTests {
    @Test("Coroutine.await returns the operation's value and resumes on the coroutine's own thread")
    func awaitReturnsValue() async throws {
        try await withTestScheduler { s in
            let outcome = try await onScheduler(s) {
                let thread = ccoro_thread_id()
                let v = try Coroutine.await {
                    try await Task.sleep(for: .milliseconds(1))
                    return "async \(withUnsafeCurrentTask { $0 != nil })"
                }
                return "\(v), same thread: \(ccoro_thread_id() == thread), on s: \(CoroutineScheduler.current === s)"
            }
            #expect(outcome == "async true, same thread: true, on s: true")
        }
    }

    @Test("Coroutine.await rethrows the operation's error")
    func awaitRethrows() async throws {
        try await withTestScheduler { s in
            let outcome = try await onScheduler(s) {
                do {
                    _ = try Coroutine.await { () async throws -> Int in
                        await Task.yield()
                        throw PromiseTestError.other
                    }
                    return "returned"
                } catch {
                    return "threw \(error)"
                }
            }
            #expect(outcome == "threw other")
        }
    }

    @Test("while a coroutine waits in Coroutine.await, another coroutine on the same scheduler runs")
    func schedulerKeepsRunning() async throws {
        try await withTestScheduler { s in
            // Given coroutine A waiting for an async operation that only coroutine B (same scheduler) can complete
            let gate = Promise<Int>()
            let steps = PromiseTestLog<String>()
            let a = Coroutine.launch(on: s) {
                steps.append("A waits")
                // The guard turns a blocked scheduler into a failure instead of a hang (generous:
                // under ThreadSanitizer with parallel suites, tasks can wait seconds for a thread).
                let v = try Coroutine.await { try await gate.timeout(hangBound).value }
                steps.append("A resumed with \(v)")
            }
            let b = Coroutine.launch(on: s) {
                steps.append("B runs")
                gate.fulfill(1)
            }
            // When both have finished
            try await a.join()
            try await b.join()
            // Then B ran while A was waiting
            #expect(steps.values == ["A waits", "B runs", "A resumed with 1"])
            #expect(a.error == nil)
        }
    }

    @Test("cancelling the coroutine cancels the task and makes Coroutine.await throw at once")
    func cancellingCoroutineCancelsTask() async throws {
        try await withTestScheduler { s in
            // Given a coroutine in Coroutine.await whose operation keeps running after cancellation
            let entered = Promise<Void>()
            let release = Promise<Void>()
            let taskSawCancellation = Promise<Bool>()
            let outcome = PromiseTestLog<String>()
            let c = Coroutine.launch(on: s) {
                do {
                    _ = try Coroutine.await {
                        entered.fulfill(())
                        _ = await Task { try? await release.value }.value   // not cancelled with us
                        taskSawCancellation.fulfill(Task.isCancelled)
                        return 1
                    }
                    outcome.append("returned")
                } catch {
                    outcome.append("\(type(of: error)); operation still running: \(release.isPending)")
                }
            }
            try await entered.value
            // When the coroutine is cancelled
            c.cancel()
            try await c.join()
            // Then Coroutine.await threw before the operation ended
            #expect(outcome.values == ["CancellationError; operation still running: true"])
            // And the operation's task had been cancelled
            release.fulfill(())
            #expect(try await taskSawCancellation.value)
        }
    }

    @Test("cancelling the coroutine delivers CancellationError inside the async operation")
    func cancellationReachesOperation() async throws {
        try await withTestScheduler { s in
            // Given a coroutine whose async operation sleeps for a minute
            let entered = Promise<Void>()
            let operationSaw = Promise<String>()
            let c = Coroutine.launch(on: s) {
                _ = try Coroutine.await {
                    entered.fulfill(())
                    do {
                        try await Task.sleep(for: hangBound)
                        operationSaw.fulfill("slept")
                    } catch {
                        operationSaw.fulfill("\(type(of: error))")
                    }
                }
            }
            try await entered.value
            // When the coroutine is cancelled
            c.cancel()
            // Then the sleep inside the task ends with CancellationError, and so does the coroutine
            #expect(try await operationSaw.value == "CancellationError")
            try await c.join()
            #expect(c.error is CancellationError)
        }
    }

    @Test("a cancelled coroutine's Coroutine.await throws CancellationError at once")
    func awaitInCancelledCoroutine() async throws {
        let outcome = try await Coroutine.run {
            Coroutine.current?.cancel()
            do {
                _ = try Coroutine.await { 1 }
                return "returned"
            } catch {
                return "\(type(of: error))"
            }
        }
        #expect(outcome == "CancellationError")
    }
}

@Suite("Coroutine.run from async code")
struct CoroutineRunBridgeTests {
    @Test("Coroutine.run returns its body's value")
    func runReturnsValue() async throws {
        #expect(try await Coroutine.run { try Coroutine.async { 6 * 7 }.await() } == 42)
    }

    @Test("Coroutine.run rethrows its body's error once the body threw")
    func runRethrows() async throws {
        // Given Coroutine.run whose body throws (watched by a task, so a hang fails instead)
        let ended = Promise<Void>()
        let run = Task {
            defer { ended.fulfill(()) }
            return try await Coroutine.run { () throws -> Int in
                try Coroutine.yield()
                throw PromiseTestError.boom
            }
        }
        // When we wait for it, at most 60 seconds (a guard against a hang, generous for TSan)
        let endedInTime = (try? await ended.timeout(hangBound).value) != nil
        if !endedInTime { run.cancel() }   // Coroutine.run's cancellation handler wakes its scheduler
        // Then it had already ended, with the body's error
        #expect(endedInTime, "Coroutine.run did not return after its body threw")
        await #expect(throws: PromiseTestError.boom) { try await run.value }
    }

    /// Guards an invariant (the run queue holds no references to its coroutines).
    @Test("a body that throws in runBlocking-style drive cancels queued unstarted coroutines; all freed")
    func runErrorCancelsQueued() async throws {
        struct Boom: Error {}
        let weak = Kit.WeakCoroutines()
        let ran = Kit.Counter()
        await #expect(throws: Boom.self) {
            try await Kit.run {
                for _ in 0..<200 {
                    weak.add(Coroutine.launch { ran.increment(); try Coroutine.yield() })
                }
                throw Boom()
            }
        }
        #expect(ran.value == 0)
        #expect(weak.alive == 0)
    }

    /// A regression test: it failed before its fix.
    @Test("Coroutine.run whose body throws cancels a sibling that keeps the run queue busy, then rethrows")
    func bodyThrowsWhileSiblingSpins() async throws {
        struct Fail: Error {}
        let spinner = Kit.Box<Coroutine?>(nil)
        await #expect(throws: Fail.self) {
            try await Kit.run { () throws -> Int in
                spinner.value = Coroutine.launch(name: "spinner") { while true { try Coroutine.yield() } }
                try Coroutine.delay(.milliseconds(20))
                throw Fail()
            }
        }
        #expect(spinner.value?.error is CancellationError)
    }
}

@Suite("Suspending calls outside a coroutine")
struct BridgeOutsideCoroutineTests {
    @Test("Coroutine.await outside a coroutine throws notInCoroutine and never runs the operation")
    func coroutineAwaitOutside() {
        let ran = PromiseTestFlag()
        #expect(throws: CoroutineError.notInCoroutine) {
            try Coroutine.await { ran.set(); return 1 }
        }
        #expect(!ran.value)
    }

    @Test("promise.await() outside a coroutine throws notInCoroutine, even when settled")
    func promiseAwaitOutside() {
        #expect(throws: CoroutineError.notInCoroutine) { try Promise<Int>().await() }
        #expect(throws: CoroutineError.notInCoroutine) { try Promise<Int>.fulfilled(1).await() }
    }

    @Test("inside an observer (a scheduler thread, outside any coroutine) both throw notInCoroutine")
    func suspendingCallsInObserver() async throws {
        try await withTestScheduler { s in
            let outcomes = try await onScheduler(s) {
                Promise<Int>.fulfilled(1).then { _ -> [String] in
                    var out: [String] = []
                    do { _ = try Promise<Int>.fulfilled(2).await() } catch { out.append("await: \(error as? CoroutineError == .notInCoroutine)") }
                    do { _ = try Coroutine.await { 3 } } catch { out.append("Coroutine.await: \(error as? CoroutineError == .notInCoroutine)") }
                    return out
                }
            }.value
            #expect(outcomes == ["await: true", "Coroutine.await: true"])
        }
    }

    @Test("promise.await() on a plain thread throws notInCoroutine without blocking")
    func promiseAwaitOnPlainThread() async {
        let outcome: String = await withCheckedContinuation { k in
            Thread.detachNewThread {
                do { _ = try Promise<Int>().await(); k.resume(returning: "returned") } catch {
                    k.resume(returning: "\(error)")
                }
            }
        }
        #expect(outcome == "\(CoroutineError.notInCoroutine)")
    }
}
