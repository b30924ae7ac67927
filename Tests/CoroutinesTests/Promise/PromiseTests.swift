@testable import Coroutines
import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

// Settlement, observers, await inside coroutines and cancellation, as the Promises article states
// them (<doc:Promises>). Combinators are in PromiseCombinatorTests.swift; Swift-concurrency bridges
// (<doc:CoroutinesAndSwiftConcurrency>) in ConcurrencyBridgeTests.swift. The helpers they share are
// in Support/PromiseTestKit.swift.

// MARK: - First settlement wins

@Suite("Promise settlement")
struct PromiseSettlementTests {
    @Test("a new promise is pending with no result")
    func newPromiseIsPending() {
        let p = Promise<Int>()
        #expect(p.isPending)
        #expect(!p.isFulfilled)
        #expect(!p.isRejected)
        #expect(p.result == nil)
    }

    @Test("fulfill returns true once, then fulfill and reject return false and change nothing")
    func firstFulfillWins() {
        let p = Promise<Int>()
        #expect(p.fulfill(1))
        #expect(!p.fulfill(2))
        #expect(!p.reject(PromiseTestError.boom))
        #expect(!p.isPending)
        #expect(p.isFulfilled)
        #expect(!p.isRejected)
        #expect(successValue(p.result) == 1)
    }

    @Test("reject returns true once, then reject and fulfill return false and change nothing")
    func firstRejectWins() {
        let p = Promise<Int>()
        #expect(p.reject(PromiseTestError.boom))
        #expect(!p.reject(PromiseTestError.other))
        #expect(!p.fulfill(3))
        #expect(!p.isPending)
        #expect(p.isRejected)
        #expect(!p.isFulfilled)
        #expect(failure(p.result) as? PromiseTestError == .boom)
    }

    @Test("fulfilled(_:) and rejected(_:) are settled at creation")
    func settledFactories() {
        let f = Promise<String>.fulfilled("x")
        #expect(f.isFulfilled)
        #expect(successValue(f.result) == "x")
        #expect(!f.reject(PromiseTestError.boom))

        let r = Promise<String>.rejected(PromiseTestError.other)
        #expect(r.isRejected)
        #expect(failure(r.result) as? PromiseTestError == .other)
        #expect(!r.fulfill("y"))
    }

    @Test("init(_:) runs its body at once, on the calling thread, with the new promise")
    func initRunsBodyAtOnce() {
        let callerThread = ccoro_thread_id()
        let bodyThread = Mutex<UInt64?>(nil)
        let p = Promise<Int> { promise in
            bodyThread.locked { $0 = ccoro_thread_id() }
            promise.fulfill(5)
        }
        #expect(bodyThread.locked { $0 } == callerThread)
        #expect(successValue(p.result) == 5)
    }

    @Test("of many threads racing to settle one promise, exactly one wins and its value stays")
    func concurrentSettlementHasOneWinner() {
        for _ in 0..<200 {
            // Given a pending promise and eight threads
            let p = Promise<Int>()
            let winners = PromiseTestLog<Int>()
            // When each tries to settle it (odd threads reject)
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let won = i.isMultiple(of: 2) ? p.fulfill(i) : p.reject(PromiseTestError.code(i))
                if won { winners.append(i) }
            }
            // Then exactly one call returned true and the result is that call's
            #expect(winners.values.count == 1)
            guard let winner = winners.values.first else { return }
            if winner.isMultiple(of: 2) {
                #expect(successValue(p.result) == winner)
            } else {
                #expect(failure(p.result) as? PromiseTestError == .code(winner))
            }
        }
    }
}

// MARK: - Observers

@Suite("Promise observers")
struct PromiseObserverTests {
    struct Visit: Sendable, Equatable {
        var index: Int
        var value: Int
        var onRegisteringScheduler: Bool
        var inCoroutine: Bool
    }

    @Test("five observers registered from a coroutine run once each, in registration order, on its scheduler, outside any coroutine")
    func observersRunInRegistrationOrder() async throws {
        try await withTestScheduler { s in
            // Given five observers registered from a coroutine on s
            let p = Promise<Int>()
            let visits = PromiseTestLog<Visit>()
            let derived = try await onScheduler(s) {
                (0..<5).map { i in
                    p.then { v in
                        visits.append(Visit(index: i, value: v, onRegisteringScheduler: CoroutineScheduler.current === s,
                                            inCoroutine: Coroutine.current != nil))
                    }
                }
            }
            #expect(visits.values.isEmpty)

            // When the promise is fulfilled from another thread, then settled again
            #expect(p.fulfill(7))
            for d in derived { try await d.value }
            #expect(!p.fulfill(8))
            #expect(!p.reject(PromiseTestError.boom))
            try await flush(s)

            // Then each ran exactly once, in order, on s, outside any coroutine
            #expect(visits.values == (0..<5).map {
                Visit(index: $0, value: 7, onRegisteringScheduler: true, inCoroutine: false)
            })
        }
    }

    @Test("observers of every kind share one registration order")
    func mixedObserversKeepRegistrationOrder() async throws {
        try await withTestScheduler { s in
            // Given then, catch, recover, always and then again, registered from a coroutine on s
            let p = Promise<Int>()
            let order = PromiseTestLog<String>()
            let last = try await onScheduler(s) {
                _ = p.then { _ in order.append("then") }
                _ = p.catch { _ in order.append("catch") }
                _ = p.recover { _ in order.append("recover"); return 0 }
                _ = p.always { _ in order.append("always") }
                return p.then { _ in order.append("then-last") }
            }
            // When the promise is rejected (then skips its transform, the others see the error)
            p.reject(PromiseTestError.boom)
            await #expect(throws: PromiseTestError.boom) { try await last.value }
            // Then the handlers that run do so in registration order
            #expect(order.values == ["catch", "recover", "always"])
        }
    }

    @Test("an observer registered after settlement runs after those registered before it")
    func lateObserverRunsAfterEarlierOnes() async throws {
        try await withTestScheduler { s in
            // Given observers A and B registered from a coroutine on s while pending
            let p = Promise<Int>()
            let order = PromiseTestLog<String>()
            let derived = try await onScheduler(s) {
                let a = p.then { _ in order.append("A") }
                let b = p.then { _ in order.append("B") }
                // When another thread fulfils the promise (this coroutine waits, without
                // suspending, until it has) and C is registered afterwards, in the same turn
                let fulfilled = DispatchSemaphore(value: 0)
                DispatchQueue.global().async {
                    p.fulfill(1)
                    fulfilled.signal()
                }
                fulfilled.wait()
                let c = p.then { _ in order.append("C") }
                return [a, b, c]
            }
            for d in derived { try await d.value }
            // Then they ran in registration order
            #expect(order.values == ["A", "B", "C"])
        }
    }

    @Test("observers never run inside fulfill or reject")
    func observersNeverRunInsideSettlement() async throws {
        try await withTestScheduler { s in
            // Given observers that record whether the settling call had returned
            let seen = PromiseTestLog<String>()
            let derived: [Promise<Void>] = try await onScheduler(s) {
                let fulfilledReturned = PromiseTestFlag()
                let rejectedReturned = PromiseTestFlag()
                let p = Promise<Int>()
                let q = Promise<Int>()
                let a = p.then { _ in seen.append("then after fulfill returned: \(fulfilledReturned.value)") }
                let b = q.catch { _ in seen.append("catch after reject returned: \(rejectedReturned.value)") }
                    .then { _ in }.recover { _ in }
                // When the coroutine settles both promises and only then sets the flags
                p.fulfill(1)
                fulfilledReturned.set()
                q.reject(PromiseTestError.boom)
                rejectedReturned.set()
                return [a, b]
            }
            for d in derived { try await d.value }
            // Then no observer ran inside the settling call
            #expect(seen.values.sorted() == ["catch after reject returned: true", "then after fulfill returned: true"])
        }
    }

    @Test("registering an observer on a settled promise never runs it inside the registration")
    func observersNeverRunInsideRegistration() async throws {
        try await withTestScheduler { s in
            // Given settled promises and a flag set right after each registration returns
            let seen = PromiseTestLog<String>()
            let derived: [Promise<Void>] = try await onScheduler(s) {
                let returned = PromiseTestFlag()
                let ok = Promise<Int>.fulfilled(1)
                let bad = Promise<Int>.rejected(PromiseTestError.boom)
                // When observers of every kind are registered
                let a = ok.then { _ in seen.append("then \(returned.value)") }
                let b = bad.catch { _ in seen.append("catch \(returned.value)") }.then { _ in }.recover { _ in }
                let c = bad.recover { _ in seen.append("recover \(returned.value)"); return 0 }.then { _ in }
                let d = ok.always { _ in seen.append("always \(returned.value)") }.then { _ in }
                let e = ok.then { _ in seen.append("then-promise \(returned.value)"); return Promise<Int>.fulfilled(2) }
                    .then { _ in }
                returned.set()
                return [a, b, c, d, e]
            }
            for d in derived { try await d.value }
            // Then every observer ran after its registration had returned
            #expect(seen.values.sorted() == ["always true", "catch true", "recover true", "then true", "then-promise true"])
        }
    }

    @Test("an observer registered in a coroutine runs on that scheduler even when another thread settles")
    func observerRunsOnRegisteringSchedulerWhenSettledElsewhere() async throws {
        try await withTestScheduler { s in
            let p = Promise<Int>()
            let where_ = PromiseTestLog<Bool>()
            let d = try await onScheduler(s) {
                p.then { _ in where_.append(CoroutineScheduler.current === s && Coroutine.current == nil) }
            }
            Thread.detachNewThread { p.fulfill(1) }
            try await d.value
            #expect(where_.values == [true])
        }
    }

    @Test("observers registered from a Swift task or a plain thread run on a pool scheduler, outside any coroutine")
    func observersFromPlainThreadsRunOnPool() async throws {
        // Given one observer registered from this task and one from a Foundation thread
        let p = Promise<Int>()
        let places = PromiseTestLog<String>()
        let fromTask = p.then { _ in places.append("task: \(currentPlace())") }
        let fromThread: Promise<Void> = await withCheckedContinuation { k in
            Thread.detachNewThread {
                k.resume(returning: p.then { _ in places.append("thread: \(currentPlace())") })
            }
        }
        // When the promise is fulfilled
        p.fulfill(1)
        try await fromTask.value
        try await fromThread.value
        // Then both ran on a scheduler of the default pool, outside any coroutine
        #expect(places.values.sorted() == ["task: pool scheduler, no coroutine", "thread: pool scheduler, no coroutine"])
    }
}

// MARK: - Await inside coroutines

@Suite("Promise await in coroutines")
struct PromiseAwaitTests {
    @Test("await returns the value once another coroutine fulfils the promise")
    func awaitReturnsValueFulfilledLater() async throws {
        try await withTestScheduler { s in
            // Given a coroutine suspended in await (it starts before the fulfiller on the same scheduler)
            let p = Promise<String>()
            let steps = PromiseTestLog<String>()
            let waiter = Coroutine.launch(on: s) {
                steps.append("waiting")
                steps.append("got \(try p.await())")
            }
            let fulfiller = Coroutine.launch(on: s) {
                steps.append("fulfilling")
                p.fulfill("hello")
                steps.append("fulfilled")
            }
            // When the fulfiller runs
            try await waiter.join()
            try await fulfiller.join()
            // Then the waiter resumed with the value, after the fulfiller had finished its turn
            #expect(steps.values == ["waiting", "fulfilling", "fulfilled", "got hello"])
            #expect(waiter.error == nil)
        }
    }

    @Test("await throws the rejection error")
    func awaitThrowsRejection() async throws {
        try await withTestScheduler { s in
            let p = Promise<Int>()
            let waiter = Coroutine.async(on: s) { try p.await() }
            Coroutine.launch(on: s) { p.reject(PromiseTestError.boom) }
            await #expect(throws: PromiseTestError.boom) { try await waiter.value }
        }
    }

    @Test("await on a promise settled before the call returns the value or throws at once")
    func awaitOnSettledPromise() async throws {
        let outcome = try await Coroutine.run {
            let value = try Promise<Int>.fulfilled(4).await()
            do {
                _ = try Promise<Int>.rejected(PromiseTestError.other).await()
                return "\(value), no error"
            } catch {
                return "\(value), \(error)"
            }
        }
        #expect(outcome == "4, other")
    }

    /// Guards an invariant (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("await of a settled promise still checks cancellation and an expired timeout first, and needs no suspension")
    func settledAwaitChecksInterrupts() async throws {
        let outcome = try await Kit.run { () -> [String] in
            var log: [String] = []
            let settled = Promise<Int>.fulfilled(7)
            // No suspension: a ready coroutine queued behind this one does not run in between.
            let flag = Atomic<Bool>(false)
            Coroutine.launch { flag.store(true, ordering: .relaxed) }
            for _ in 0..<100 { log.append("\(try settled.await())") }
            log.append(flag.load(ordering: .relaxed) ? "other ran" : "no switch")
            do {
                _ = try Coroutine.withTimeout(.milliseconds(1)) { () throws -> Int in
                    // The scope expires during the delay; its error is swallowed, so the await
                    // of the settled promise is the next suspending call.
                    do { try Coroutine.delay(.milliseconds(50)) } catch {}
                    do { return try settled.await() } catch CoroutineError.timedOut {
                        log.append("await timed out")
                        throw CoroutineError.timedOut
                    }
                }
                log.append("no timeout")
            } catch CoroutineError.timedOut { log.append("timed out") }
            let me = Coroutine.current!
            me.cancel()
            do { _ = try settled.await(); log.append("no cancel") } catch is CancellationError { log.append("cancelled") }
            do { _ = try Promise<Int>.rejected(Kit.NumberedBoom(n: 1)).await() } catch { log.append(error is CancellationError ? "cancelled" : "\(error)") }
            return log
        }
        #expect(outcome.prefix(100).allSatisfy { $0 == "7" })
        #expect(Array(outcome.dropFirst(100)) == ["no switch", "await timed out", "timed out", "cancelled", "cancelled"])
    }

    @Test("a hundred coroutines on two schedulers await one promise fulfilled from a dispatch queue")
    func manyAwaitersOnTwoSchedulers() async throws {
        try await withTestSchedulers(2) { schedulers in
            // Given 100 coroutines, 50 per scheduler, awaiting one promise
            let p = Promise<Int>()
            let waiting = Atomic<Int>(0)
            let allWaiting = Promise<Void>()
            let sum = Atomic<Int>(0)
            let coroutines = (0..<100).map { i in
                Coroutine.launch(on: schedulers[i % 2]) {
                    if waiting.add(1, ordering: .relaxed).newValue == 100 { allWaiting.fulfill(()) }
                    sum.add(try p.await(), ordering: .relaxed)
                }
            }
            try await allWaiting.value
            // When a plain dispatch thread fulfils it
            DispatchQueue.global().async { p.fulfill(3) }
            for c in coroutines { try await c.join() }
            // Then every coroutine got the value exactly once
            #expect(coroutines.allSatisfy { $0.error == nil })
            #expect(sum.load(ordering: .relaxed) == 300)
        }
    }

    @Test("a promise fulfilled from a Foundation thread wakes the coroutine awaiting it, on its own scheduler")
    func fulfilledFromFoundationThread() async throws {
        try await withTestScheduler { s throws in
            let p = Promise<Int>()
            let waiter = Coroutine.async(on: s) {
                let thread = ccoro_thread_id()
                let v = try p.await()
                return v == 9 && ccoro_thread_id() == thread && CoroutineScheduler.current === s
            }
            Thread.detachNewThread { p.fulfill(9) }
            #expect(try await waiter.value)
        }
    }
}

// MARK: - Cancellation

@Suite("Promise cancellation")
struct PromiseCancellationTests {
    @Test("cancelling a coroutine suspended in await throws CancellationError; the promise stays pending for other awaiters")
    func cancellingAwaiterLeavesPromisePending() async throws {
        try await withTestScheduler { s in
            // Given two coroutines suspended in await on one promise
            let p = Promise<Int>()
            let outcomes = PromiseTestLog<String>()
            let first = Coroutine.launch(on: s) {
                do { outcomes.append("first got \(try p.await())") } catch {
                    outcomes.append("first threw \(type(of: error))")
                }
            }
            let second = Coroutine.launch(on: s) { outcomes.append("second got \(try p.await())") }
            try await flush(s)
            #expect(p.testWaiterCount == 2)

            // When the first is cancelled
            first.cancel()
            try await first.join()

            // Then its await threw CancellationError, its waiter is gone and the promise is pending
            #expect(outcomes.values == ["first threw CancellationError"])
            #expect(p.isPending)
            #expect(p.testWaiterCount == 1)

            // And the other awaiter still gets the value
            p.fulfill(11)
            try await second.join()
            #expect(outcomes.values == ["first threw CancellationError", "second got 11"])
        }
    }

    @Test("cancel() rejects with CancellationError and runs each onCancel handler exactly once")
    func cancelRunsHandlersOnce() async throws {
        // Given a pending promise with two cancel handlers
        let p = Promise<Int>()
        let runs = PromiseTestLog<String>()
        p.onCancel { runs.append("a") }
        p.onCancel { runs.append("b") }
        // When it is cancelled twice
        p.cancel()
        p.cancel()
        // Then it is rejected with CancellationError and each handler ran once
        #expect(p.isRejected)
        #expect(failure(p.result) is CancellationError)
        await #expect(throws: CancellationError.self) { try await p.value }
        #expect(runs.values.sorted() == ["a", "b"])
        #expect(!p.fulfill(1))
    }

    @Test("an onCancel handler registered after cancel runs once, asynchronously, on the registering scheduler")
    func lateCancelHandlerRunsAsynchronously() async throws {
        try await withTestScheduler { s in
            let report = Promise<String>()
            let runs = Atomic<Int>(0)
            try await onScheduler(s) {
                // Given a cancelled promise
                let p = Promise<Int>()
                p.cancel()
                // When a handler is registered
                let registered = PromiseTestFlag()
                p.onCancel {
                    runs.add(1, ordering: .relaxed)
                    report.fulfill("after registration returned: \(registered.value), on s: \(CoroutineScheduler.current === s)")
                }
                registered.set()
            }
            // Then it ran once, after onCancel returned, on s
            #expect(try await report.value == "after registration returned: true, on s: true")
            try await flush(s)
            #expect(runs.load(ordering: .relaxed) == 1)
        }
    }

    @Test("cancel() on a settled promise changes nothing, and onCancel handlers never run")
    func cancelAfterSettlementDoesNothing() async throws {
        try await withTestScheduler { s in
            let ran = PromiseTestFlag()
            let p = try await onScheduler(s) {
                let p = Promise<Int>()
                p.onCancel { ran.set() }
                p.fulfill(1)
                p.cancel()
                p.onCancel { ran.set() }   // registered after another settlement
                return p
            }
            try await flush(s)
            #expect(successValue(p.result) == 1)
            #expect(!ran.value)
        }
    }

    @Test("cancel() racing with fulfil on another thread: handlers run only if the promise ends up cancelled")
    func cancelRacingFulfil() async {
        // Given many pending promises, each with a cancel handler
        let count = 20_000
        let promises = (0..<count).map { _ in Promise<Int>() }
        let handlerRuns = (0..<count).map { _ in PromiseTestFlag() }
        for (p, ran) in zip(promises, handlerRuns) { p.onCancel { ran.set() } }
        // When one thread cancels them in order while another fulfils them in the same order
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            let finished = Atomic<Int>(0)
            for canceller in [true, false] {
                Thread.detachNewThread {
                    for (i, p) in promises.enumerated() {
                        if canceller { p.cancel() } else { p.fulfill(i) }
                    }
                    if finished.add(1, ordering: .sequentiallyConsistent).newValue == 2 { k.resume() }
                }
            }
        }
        // Then for each promise the handler ran if and only if the cancellation won
        let mismatched = promises.indices.filter { handlerRuns[$0].value != promises[$0].isRejected }
        #expect(mismatched.count == 0, """
            \(mismatched.count) of \(count) promises ended fulfilled although their onCancel handlers ran \
            (first at index \(mismatched.first ?? -1))
            """)
    }

    @Test("cancelling the promise of Coroutine.async cancels the coroutine at its next delay")
    func cancellingAsyncPromiseCancelsCoroutine() async throws {
        try await withTestScheduler { s in
            // Given a Coroutine.async body that has started
            let started = Promise<Void>()
            let bodyEnded = Promise<String>()
            let p = Coroutine.async(on: s) { () throws -> Int in
                started.fulfill(())
                do {
                    try Coroutine.delay(hangBound)
                    bodyEnded.fulfill("delay returned")
                } catch {
                    bodyEnded.fulfill("delay threw \(type(of: error)), isActive \(Coroutine.isActive)")
                    throw error
                }
                return 1
            }
            try await started.value
            // When its promise is cancelled
            p.cancel()
            // Then the body saw CancellationError at its delay and the promise is rejected with it
            #expect(try await bodyEnded.value == "delay threw CancellationError, isActive false")
            #expect(failure(p.result) is CancellationError)
        }
    }

    @Test("cancelling the promise of Coroutine.async before it starts means the body never runs")
    func cancellingUnstartedAsync() async throws {
        try await withTestScheduler { s in
            let ran = PromiseTestFlag()
            let p = try await onScheduler(s) {
                // Launched and cancelled in the same turn, so it has not started yet
                let p = Coroutine.async(on: s) { ran.set() }
                p.cancel()
                return p
            }
            await #expect(throws: CancellationError.self) { try await p.value }
            try await flush(s)
            #expect(!ran.value)
        }
    }
}

/// Replaces the global `Coroutine.unobservedErrorHandler`, so it is nested in the serialized
/// "Unobserved errors" suite (UnobservedErrorTests.swift) with every other test that does.
extension UnobservedErrorTests {
@Suite("Coroutine.async error reporting")
struct PromiseAsyncErrorReportingTests {
    @Test("an error thrown by a Coroutine.async body rejects its promise and is not reported as unobserved")
    func asyncErrorIsNotReported() async throws {
        // Given a handler that records our errors (and forwards anyone else's to the default)
        let reports = PromiseTestLog<String>()
        let controlReported = Promise<Void>()
        Coroutine.unobservedErrorHandler = { coroutine, error in
            guard let e = error as? PromiseTestError else {
                return Coroutine.defaultUnobservedErrorHandler(coroutine, error)
            }
            reports.append("\(coroutine.name ?? "?"): \(e)")
            if e == .control { controlReported.fulfill(()) }
        }
        defer { Coroutine.unobservedErrorHandler = Coroutine.defaultUnobservedErrorHandler }

        try await withTestScheduler { s in
            // When a Coroutine.async body throws
            let p = Coroutine.async(on: s, name: "async-body") { () throws -> Int in throw PromiseTestError.boom }
            await #expect(throws: PromiseTestError.boom) { try await p.value }
            // and afterwards, on the same scheduler, a launch body throws (that one is reported;
            // reports run in order on the scheduler, so the first would come before it)
            Coroutine.launch(on: s, name: "control") { throw PromiseTestError.control }
            try await controlReported.timeout(hangBound).value

            // Then only the launch's error was reported
            #expect(reports.values == ["control: control"])
        }
    }
}
}
