@testable import Coroutines
import Dispatch
import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport

// then, catch, recover, always, all, race and timeout (see the Promises article, <doc:Promises>),
// and `race([])` / `all([])` (<doc:BadInputAndMisuse>). Helpers live in
// Support/PromiseTestKit.swift.

@Suite("Promise chaining")
struct PromiseChainingTests {
    @Test("then transforms the value")
    func thenTransformsValue() async throws {
        let p = Promise<Int>()
        let doubled = p.then { $0 * 2 }.then { "\($0)" }
        p.fulfill(21)
        #expect(try await doubled.value == "42")
    }

    @Test("a then that throws rejects the derived promise with its error")
    func throwingThenRejects() async throws {
        let p = Promise<Int>.fulfilled(1)
        let derived = p.then { (_: Int) throws -> Int in throw PromiseTestError.boom }
        await #expect(throws: PromiseTestError.boom) { try await derived.value }
    }

    @Test("a rejection skips then and reaches catch, which passes it on")
    func rejectionSkipsThenAndReachesCatch() async throws {
        // Given a chain then → then → catch → then
        let p = Promise<Int>()
        let calls = PromiseTestLog<String>()
        let afterCatch = p
            .then { v in calls.append("then 1"); return v + 1 }
            .then { v in calls.append("then 2"); return v + 1 }
            .catch { error in calls.append("catch \(error)") }
        let afterCatchThen = afterCatch.then { v in calls.append("then 3"); return v }
        // When the source is rejected
        p.reject(PromiseTestError.boom)
        // Then the thens are skipped, catch sees the error and the rejection passes on
        await #expect(throws: PromiseTestError.boom) { try await afterCatch.value }
        await #expect(throws: PromiseTestError.boom) { try await afterCatchThen.value }
        #expect(calls.values == ["catch boom"])
    }

    @Test("catch on a fulfilled promise does not run its handler and passes the value on")
    func catchPassesValueOn() async throws {
        let ran = PromiseTestFlag()
        let derived = Promise<Int>.fulfilled(3).catch { _ in ran.set() }
        #expect(try await derived.value == 3)
        #expect(!ran.value)
    }

    @Test("a then's error reaches a later catch")
    func thenErrorReachesCatch() async throws {
        let caught = PromiseTestLog<String>()
        let derived = Promise<Int>.fulfilled(1)
            .then { (_: Int) throws -> Int in throw PromiseTestError.other }
            .catch { caught.append("\($0)") }
        await #expect(throws: PromiseTestError.other) { try await derived.value }
        #expect(caught.values == ["other"])
    }

    @Test("recover turns a rejection into a value")
    func recoverTurnsRejectionIntoValue() async throws {
        let seen = PromiseTestLog<String>()
        let recovered = Promise<Int>.rejected(PromiseTestError.boom)
            .then { $0 + 100 }
            .recover { error in seen.append("\(error)"); return -1 }
        #expect(try await recovered.value == -1)
        #expect(seen.values == ["boom"])
    }

    @Test("recover that throws rejects with its own error")
    func throwingRecoverRejects() async throws {
        let recovered = Promise<Int>.rejected(PromiseTestError.boom).recover { _ in throw PromiseTestError.other }
        await #expect(throws: PromiseTestError.other) { try await recovered.value }
    }

    @Test("recover on a fulfilled promise passes the value through without running")
    func recoverPassesValueThrough() async throws {
        let ran = PromiseTestFlag()
        let recovered = Promise<Int>.fulfilled(5).recover { _ in ran.set(); return 0 }
        #expect(try await recovered.value == 5)
        #expect(!ran.value)
    }

    @Test("a then returning a fulfilled promise adopts its value")
    func thenAdoptsFulfilledPromise() async throws {
        let inner = Promise<String>()
        let derived = Promise<Int>.fulfilled(2).then { v -> Promise<String> in
            DispatchQueue.global().async { inner.fulfill("inner \(v)") }
            return inner
        }
        #expect(try await derived.value == "inner 2")
    }

    @Test("a then returning a rejected promise adopts its rejection")
    func thenAdoptsRejectedPromise() async throws {
        let derived = Promise<Int>.fulfilled(2).then { _ -> Promise<String> in .rejected(PromiseTestError.other) }
        await #expect(throws: PromiseTestError.other) { try await derived.value }
    }

    @Test("a promise-returning then that throws rejects, and one on a rejection is skipped")
    func promiseThenThrowsOrIsSkipped() async throws {
        let throwing = Promise<Int>.fulfilled(1).then { (_: Int) throws -> Promise<String> in throw PromiseTestError.boom }
        await #expect(throws: PromiseTestError.boom) { try await throwing.value }

        let ran = PromiseTestFlag()
        let skipped = Promise<Int>.rejected(PromiseTestError.other).then { _ -> Promise<String> in
            ran.set()
            return .fulfilled("no")
        }
        await #expect(throws: PromiseTestError.other) { try await skipped.value }
        #expect(!ran.value)
    }

    @Test("a promise adopted by then stays pending until the inner promise settles")
    func adoptedPromiseStaysPending() async throws {
        try await withTestScheduler { s in
            // Given a then that returns a pending inner promise
            let inner = Promise<Int>()
            let outer = try await onScheduler(s) { Promise<Int>.fulfilled(0).then { _ in inner } }
            try await flush(s)
            try await flush(s)
            // Then the derived promise waits for it
            #expect(outer.isPending)
            inner.reject(PromiseTestError.boom)
            await #expect(throws: PromiseTestError.boom) { try await outer.value }
        }
    }

    @Test("always runs for both outcomes and passes the settlement through")
    func alwaysRunsForBothOutcomes() async throws {
        let seen = PromiseTestLog<String>()
        let ok = Promise<Int>.fulfilled(1).always { r in seen.append("ok: \(successValue(r).map(String.init) ?? "-")") }
        let bad = Promise<Int>.rejected(PromiseTestError.boom).always { r in seen.append("bad: \(failure(r).map { "\($0)" } ?? "-")") }
        #expect(try await ok.value == 1)
        await #expect(throws: PromiseTestError.boom) { try await bad.value }
        #expect(seen.values.sorted() == ["bad: boom", "ok: 1"])
    }
}

@Suite("Promise.all and Promise.race")
struct PromiseAllRaceTests {
    @Test("all keeps input order when the inputs are fulfilled in reverse order from other threads")
    func allKeepsInputOrder() async throws {
        // Given five pending promises
        let inputs = (0..<5).map { _ in Promise<Int>() }
        let all = Promise.all(inputs)
        // When they are fulfilled last to first, each from its own thread
        for i in inputs.indices.reversed() {
            await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    inputs[i].fulfill(i * 10)
                    k.resume()
                }
            }
            if i > 0 { #expect(all.isPending) }
        }
        // Then the values come out in input order
        #expect(try await all.value == [0, 10, 20, 30, 40])
    }

    @Test("all of many promises fulfilled concurrently collects every value in order")
    func allCollectsConcurrentFulfilments() async throws {
        let inputs = (0..<200).map { _ in Promise<Int>() }
        let all = Promise.all(inputs)
        DispatchQueue.global().async {
            DispatchQueue.concurrentPerform(iterations: inputs.count) { i in inputs[i].fulfill(i) }
        }
        #expect(try await all.value == Array(0..<200))
    }

    @Test("all fails fast with the first rejection, while other inputs are still pending")
    func allFailsFast() async throws {
        // Given three pending promises
        let inputs = (0..<3).map { _ in Promise<Int>() }
        let all = Promise.all(inputs)
        // When the middle one is rejected
        inputs[1].reject(PromiseTestError.boom)
        // Then all is rejected with that error without waiting for the others
        await #expect(throws: PromiseTestError.boom) { try await all.value }
        #expect(inputs[0].isPending && inputs[2].isPending)
        // And a later rejection does not replace it
        inputs[2].reject(PromiseTestError.other)
        inputs[0].fulfill(0)
        await #expect(throws: PromiseTestError.boom) { try await all.value }
    }

    @Test("all([]) is fulfilled at once with []")
    func allOfNothing() async throws {
        let all = Promise<Int>.all([])
        #expect(all.isFulfilled)
        #expect(try await all.value == [])
    }

    @Test("race takes the first fulfilment; later settlements are ignored")
    func raceTakesFirstFulfilment() async throws {
        try await withTestScheduler { s in
            // Given a race of three pending promises, observed on s
            let inputs = (0..<3).map { _ in Promise<String>() }
            let race = try await onScheduler(s) { Promise.race(inputs) }
            // When the last input is fulfilled first
            inputs[2].fulfill("third")
            #expect(try await race.value == "third")
            // Then later settlements, once their observers ran, change nothing
            inputs[0].reject(PromiseTestError.boom)
            inputs[1].fulfill("second")
            try await flush(s)
            #expect(successValue(race.result) == "third")
        }
    }

    @Test("race takes the first rejection")
    func raceTakesFirstRejection() async throws {
        let inputs = (0..<3).map { _ in Promise<String>() }
        let race = Promise.race(inputs)
        inputs[1].reject(PromiseTestError.other)
        await #expect(throws: PromiseTestError.other) { try await race.value }
        inputs[0].fulfill("late")
        await #expect(throws: PromiseTestError.other) { try await race.value }
    }

    @Test("race with an already settled input settles like it")
    func raceWithSettledInput() async throws {
        let race = Promise.race([Promise<Int>(), .fulfilled(8), Promise<Int>()])
        #expect(try await race.value == 8)
    }

    @Test("race([]) rejects with PromiseError.empty")
    func raceOfNothing() async throws {
        let race = Promise<Int>.race([])
        #expect(race.isRejected)
        await #expect(throws: PromiseError.empty) { try await race.value }
    }
}

@Suite("Promise.timeout")
struct PromiseTimeoutTests {
    @Test("timeout rejects with PromiseError.timedOut when the promise does not settle in time")
    func timeoutRejects() async throws {
        try await withTestScheduler { s in
            // Given a promise that never settles in time
            let p = Promise<Int>()
            let limited = try await onScheduler(s) { p.timeout(.milliseconds(20)) }
            // Then the derived promise times out
            await #expect(throws: PromiseError.timedOut) { try await limited.value }
            // And a later settlement of the source does not change it
            p.fulfill(1)
            try await flush(s)
            #expect(failure(limited.result) as? PromiseError == .timedOut)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("timeout passes the value through and releases its timer when the promise settles first")
    func timeoutReleasesTimer() async throws {
        try await withTestScheduler { s in
            // Given a long timeout armed from a coroutine on s
            let p = Promise<Int>()
            let (limited, armed) = try await onScheduler(s) {
                let before = s.timers.count
                let limited = p.timeout(hangBound)
                return (limited, s.timers.count - before)
            }
            #expect(armed == 1)
            // When the promise is fulfilled first
            p.fulfill(6)
            // Then the value passes through and, once the observers ran, no timer is left armed
            #expect(try await limited.value == 6)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("timeout passes a rejection through and releases its timer")
    func timeoutPassesRejection() async throws {
        try await withTestScheduler { s in
            let p = Promise<Int>()
            let limited = try await onScheduler(s) { p.timeout(hangBound) }
            p.reject(PromiseTestError.boom)
            await #expect(throws: PromiseTestError.boom) { try await limited.value }
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("timeout of an already settled promise settles like it and leaves no timer")
    func timeoutOfSettledPromise() async throws {
        try await withTestScheduler { s in
            let limited = try await onScheduler(s) { Promise<Int>.fulfilled(2).timeout(hangBound) }
            #expect(try await limited.value == 2)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("timeout armed from a Swift task (a pool scheduler) rejects with timedOut")
    func timeoutFromTask() async throws {
        let limited = Promise<Int>().timeout(.milliseconds(10))
        await #expect(throws: PromiseError.timedOut) { try await limited.value }
    }

    @Test("timeout armed inside Coroutine.run still fires after run has returned")
    func timeoutOutlivesCoroutineRun() async throws {
        // Given a timeout armed on Coroutine.run's temporary scheduler, returned out of it
        let p = Promise<Int>()
        let limited = try await Coroutine.run { p.timeout(.milliseconds(20)) }
        // When we wait for it to settle (`outcome(of:)` reports a hang instead of hanging)
        let settled = try await outcome(of: limited)
        // Then it has timed out
        #expect(settled == "rejected: \(PromiseError.timedOut)")
    }

    @Test("100,000 abandoned timeouts leave no timer armed, with or without their original")
    func abandonedTimeoutsReleaseTheirTimers() async throws {
        try await withTestScheduler { s in
            // Given a pending promise that stays referenced
            let kept = Promise<Int>()
            let (afterDropped, afterKept) = try await onScheduler(s) {
                let before = s.timers.count
                // When 100,000 hour-long timeouts are made and dropped at once: of promises
                // dropped too, and of one promise that stays pending and referenced
                for i in 0..<100_000 {
                    _ = Promise<Int>().timeout(.seconds(3600))
                    if i % 1_000 == 0 { try Coroutine.yield() }   // no stall report (under TSan 10,000 took over 100 ms)
                }
                let afterDropped = s.timers.count - before
                for i in 0..<100_000 {
                    _ = kept.timeout(.seconds(3600))
                    if i % 1_000 == 0 { try Coroutine.yield() }
                }
                return (afterDropped, s.timers.count - before)
            }
            // Then no timer is left armed (each is disarmed when its promise is freed)
            #expect(afterDropped == 0)
            #expect(afterKept == 0)
            // And the original still settles normally
            kept.fulfill(1)
            #expect(try await kept.value == 1)
        }
    }

    @Test("a timeout that only an observer's promise leads to still fires (the observer keeps it alive)")
    func timeoutKeptAliveByItsObserver() async throws {
        try await withTestScheduler { s in
            // Given a timeout whose original and whose own promise are both dropped, with only
            // the promise of a `then` on it kept
            let chained = try await onScheduler(s) { Promise<Int>().timeout(.milliseconds(20)).then { $0 + 1 } }
            // When we wait for it to settle (`outcome(of:)` reports a hang instead of hanging)
            let settled = try await outcome(of: chained)
            // Then the timeout fired through the chain, and its timer is gone
            #expect(settled == "rejected: \(PromiseError.timedOut)")
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("a timeout armed onto a stopped scheduler is rejected with schedulerStopped, not left pending")
    func timeoutOnStoppedScheduler() async throws {
        // Given a dedicated scheduler that has stopped
        let s = CoroutineScheduler(name: "stopped-before-timeout")
        try await flush(s)
        s.stop()
        #expect(await CoroutineTestKit.eventually { s.isStopped })
        // When a timeout's timer is armed onto it from another thread
        let limited = Promise<Int>().timeout(.seconds(3600), on: s)
        // Then the timeout's promise is rejected with schedulerStopped, not left pending (a
        // dropped timer shows as a hang) nor timed out (its timer armed anyway)
        let settled = try await outcome(of: limited)
        #expect(settled == "rejected: \(CoroutineError.schedulerStopped)")
    }

    /// A regression test: it failed before its fix.
    @Test("Promise.timeout armed on a dedicated scheduler still fires after that scheduler stopped")
    func promiseTimeoutOutlivesStoppedScheduler() async throws {
        // Given a timeout armed from a coroutine on a scheduler that is then stopped
        let s = CoroutineScheduler(name: "short-lived")
        let never = Promise<Int>()
        let derived = try await Coroutine.async(on: s) { never.timeout(.milliseconds(50)) }.value
        s.stop()
        // Then the derived promise is still rejected with timedOut
        await #expect(throws: PromiseError.timedOut) { try await derived.value }
    }
}
