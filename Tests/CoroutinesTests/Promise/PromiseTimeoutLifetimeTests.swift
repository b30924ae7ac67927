@_spi(Diagnostics) @testable import Coroutines
import CoroutinesTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing

// Who keeps the promise of `Promise.timeout` alive, and what disarms its timer (PromiseTimeout):
// a timeout held only by its waiter, its observers or nobody; settled by its original, its timer,
// cancel() or a direct settlement, at the same moment from other threads.

extension PromiseTimeoutTests {
    @Test("a coroutine awaiting a timeout that nothing else holds is rejected with timedOut")
    func coroutineAwaitingUnheldTimeout() async throws {
        // Given a coroutine that awaits a timeout of a dropped promise, holding nothing else
        let outcome = try await CoroutineTestKit.run { () -> String in
            do { return "value \(try Promise<Int>().timeout(.milliseconds(20)).await())" } catch { return "\(error)" }
        }
        // Then its timer still fires
        #expect(outcome == "\(PromiseError.timedOut)")
    }

    @Test("a Swift task awaiting value of a timeout that nothing else holds is rejected with timedOut")
    func taskAwaitingUnheldTimeout() async throws {
        let outcome = await withTaskGroup(of: String.self) { group in
            group.addTask {
                do { return "value \(try await Promise<Int>().timeout(.milliseconds(20)).value)" } catch { return "\(error)" }
            }
            group.addTask {   // hang bound
                try? await Task.sleep(for: hangBound)
                return "still pending after \(hangBound)"
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
        #expect(outcome == "\(PromiseError.timedOut)")
    }

    @Test("tasks awaiting a timeout withdraw: those left get its settlement; a timeout whose every task withdrew stays pinned until its original settles, then is freed and leaves no timer")
    func taskWaitersWithdrawFromTimeout() async throws {
        try await withTestScheduler { s in
            // Given 10 tasks awaiting an hour-long timeout (armed on s)
            let original = Promise<Int>()
            let limited = original.timeout(.seconds(3600), on: s)
            let tasks = (0..<10).map { _ in Task { try await limited.value } }
            try await waitUntil("10 tasks wait") { limited.testWaiterCount == 10 }
            // When 6 are cancelled (their tombstones dropped in bulk on the way) and then the
            // original is fulfilled
            for t in tasks.prefix(6) { t.cancel() }
            for t in tasks.prefix(6) { await #expect(throws: CancellationError.self) { try await t.value } }
            #expect(limited.testWaiterCount == 4)
            original.fulfill(5)
            // Then the 4 others get the value, and no timer is left
            for t in tasks.suffix(4) { #expect(try await t.value == 5) }
            try await flush(s)
            #expect(try await onScheduler(s) { s.timers.count } == 0)

            // Given 5 tasks awaiting an hour-long timeout that nothing but them holds (it pinned
            // itself with its first waiter)
            let second = Promise<Int>()
            let watched = WeakPromise()
            do {
                let pinned = second.timeout(.seconds(3600), on: s)
                watched.set(pinned)
                let waiters = (0..<5).map { _ in Task { try await pinned.value } }
                try await waitUntil("5 tasks wait") { pinned.testWaiterCount == 5 }
                // When every one of them withdraws, and the tasks end
                for t in waiters { t.cancel() }
                for t in waiters { await #expect(throws: CancellationError.self) { try await t.value } }
                #expect(pinned.testWaiterCount == 0)
            }
            // Then it is still alive, pinned, with its timer armed
            #expect(!watched.isFreed)
            #expect(try await onScheduler(s) { s.timers.count } == 1)
            // And once its original settles it, the pin is dropped: it is freed and no timer is left
            second.fulfill(1)
            #expect(await CoroutineTestKit.eventually { watched.isFreed }, "the settled timeout is still alive")
            try await flush(s)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("then, recover, always, race and all over timeouts of dropped promises all see the timeout")
    func chainsOverUnheldTimeouts() async throws {
        // Given chains over timeouts whose originals and own promises are dropped at once
        let log = PromiseTestLog<String>()
        let chained: [Promise<String>] = [
            Promise<Int>().timeout(.milliseconds(20)).then { "then \($0)" }.recover { "then: \($0)" },
            Promise<Int>().timeout(.milliseconds(20)).recover { _ in 7 }.then { "recover \($0)" },
            Promise<Int>().timeout(.milliseconds(20)).always { log.append("always \($0)") }.then { "\($0)" }.recover { "always: \($0)" },
            Promise.race([Promise<Int>().timeout(.milliseconds(30)), Promise<Int>().timeout(.milliseconds(20))])
                .then { "race \($0)" }.recover { "race: \($0)" },
            Promise.all([Promise<Int>.fulfilled(1).timeout(.seconds(3600)), Promise<Int>().timeout(.milliseconds(20))])
                .then { "all \($0)" }.recover { "all: \($0)" },
            Promise<Int>().timeout(.seconds(3600)).timeout(.milliseconds(20)).then { "nested \($0)" }.recover { "nested: \($0)" },
        ]
        // Then each settles through its timeout
        var outcomes: [String] = []
        for p in chained { outcomes.append(try await outcome(of: p)) }
        let t = "\(PromiseError.timedOut)"
        #expect(outcomes == ["then: \(t)", "recover 7", "always: \(t)", "race: \(t)", "all: \(t)", "nested: \(t)"].map { "value \($0)" })
        #expect(log.values.count == 1)
    }

    @Test("cancel() and a direct settlement of a timeout's promise release its timer")
    func cancellingOrSettlingTheTimeoutReleasesItsTimer() async throws {
        try await withTestScheduler { s in
            // Given two hour-long timeouts armed on s
            let p = Promise<Int>()
            let (cancelled, fulfilled) = try await onScheduler(s) { (p.timeout(.seconds(3600)), p.timeout(.seconds(3600))) }
            #expect(try await onScheduler(s) { s.timers.count } == 2)
            // When one is cancelled and the other fulfilled directly, from this task's thread
            cancelled.cancel()
            fulfilled.fulfill(5)
            // Then they settle so, the original's later settlement changes neither, and no timer is left
            await #expect(throws: CancellationError.self) { try await cancelled.value }
            #expect(try await fulfilled.value == 5)
            p.fulfill(1)
            try await flush(s)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
            #expect(failure(cancelled.result) is CancellationError)
            #expect(successValue(fulfilled.result) == 5)
        }
    }

    @Test("timeouts whose original settles as their timer fires settle once, either way, and leave no timer")
    func originalAndTimerRace() async throws {
        try await withTestScheduler { s in
            // Given 2,000 timeouts of 200 µs armed on s, each original fulfilled from a plain thread
            // about when its timer fires, while the derived promise is dropped on another thread
            let values = Atomic<Int>(0), timedOut = Atomic<Int>(0), other = Atomic<Int>(0)
            for _ in 0..<2_000 {
                let p = Promise<Int>()
                let limited = try await onScheduler(s) { p.timeout(.microseconds(200)) }
                let seen = Promise<Void>()
                limited.observe { r in
                    switch r {
                    case .success: values.add(1, ordering: .relaxed)
                    case .failure(PromiseError.timedOut): timedOut.add(1, ordering: .relaxed)
                    case .failure: other.add(1, ordering: .relaxed)
                    }
                    seen.fulfill(())
                }
                try await CoroutineTestKit.onPlainThreads(2) { i in
                    if i == 0 {
                        let until = DispatchTime.now().uptimeNanoseconds + 190_000
                        while DispatchTime.now().uptimeNanoseconds < until {}
                        p.fulfill(1)
                    }
                }
                try await seen.value
            }
            // Then each settled exactly once, by its original or its timer, and no timer is left
            #expect(values.load(ordering: .relaxed) + timedOut.load(ordering: .relaxed) == 2_000)
            #expect(other.load(ordering: .relaxed) == 0)
            try await flush(s)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("timeouts dropped on other threads while their timers fire release them, with nothing left armed")
    func droppedOnOtherThreadsWhileFiring() async throws {
        try await withTestScheduler { s in
            // Given 20,000 short timeouts armed on s from plain threads and dropped there at once,
            // some before and some after their deadline
            try await CoroutineTestKit.onPlainThreads(2) { i in
                for k in 0..<10_000 {
                    let limited = Promise<Int>().timeout(.microseconds(k % 50), on: s)
                    if k % 3 == 0 { _ = limited.then { $0 } }   // an observer keeps it to its deadline
                }
            }
            // Then, once every timer is due and s has gone round its loop, none is left
            try await Task.sleep(for: .milliseconds(1))
            try await flush(s)
            #expect(try await onScheduler(s) { s.timers.count } == 0)
        }
    }

    @Test("a timeout armed from a plain thread and from inside an observer fires")
    func armedFromPlainThreadAndObserver() async throws {
        // Given a timeout armed on a plain thread, and one armed by an observer job
        let fromThread = try await CoroutineTestKit.onPlainThread { Promise<Int>().timeout(.milliseconds(20)) }
        let fromObserver = Promise<Int>.fulfilled(1).then { _ in Promise<Int>().timeout(.milliseconds(20)) }
        // Then both are rejected with timedOut
        #expect(try await outcome(of: fromThread) == "rejected: \(PromiseError.timedOut)")
        #expect(try await outcome(of: fromObserver) == "rejected: \(PromiseError.timedOut)")
    }

    @Test("a timeout freed after its scheduler stopped releases the timer handed over to the default pool")
    func handedOverTimerReleasedWithItsPromise() async throws {
        // In a child process: the default pool's timer count is the whole process's.
        await ChildProcess.run(.success, id: "handedOverTimerReleasedWithItsPromise") {
            try await CoroutineTestKit.onPlainThread { try Self.checkHandedOverTimerReleased() }
        }
    }

    private static func checkHandedOverTimerReleased() throws {
        let pool = SchedulerPool.default(for: .default).schedulers
        let before = RuntimeResources.blockingSettled(pool).armedTimers
        // Given an hour-long timeout armed on a dedicated scheduler that then stops, which hands
        // its timer over to the default pool
        let s = CoroutineScheduler(name: "handing-over")
        var limited: Promise<Int>? = try Coroutine.runBlocking { try Coroutine.async(on: s) { Promise<Int>().timeout(.seconds(3600)) }.await() }
        s.stop()
        // The stopped scheduler's thread hands its timers over after its incoming queue closed
        // (`isStopped`), as the last step of its close: no signal marks that step, so poll the
        // pool's count (settled each time) until the timer arrives, within the hang bound.
        let deadline = ContinuousClock.now + hangBound
        var handedOver = RuntimeResources.blockingSettled(pool).armedTimers
        while handedOver != before + 1 && ContinuousClock.now < deadline {
            usleep(1_000)
            handedOver = RuntimeResources.blockingSettled(pool).armedTimers
        }
        // When the timeout's promise is freed
        #expect(limited?.isPending == true)
        limited = nil
        // Then its timer is no longer armed once the pool has gone round its loop enough times
        // (the release takes at least two jobs: the one the stopped scheduler refused runs on a
        // pool scheduler, and posts the release to the scheduler that holds the timer now; one
        // full-suite run needed more than two rounds). Without the release it stays armed for an
        // hour: 100 rounds only bound the wait.
        var after = RuntimeResources.blockingSettled(pool).armedTimers
        for _ in 0..<100 where after != before { after = RuntimeResources.blockingSettled(pool).armedTimers }
        #expect(handedOver == before + 1)
        #expect(after == before, "armed before \(before), handed over \(handedOver), after the free \(after)")
    }
}

/// A weak reference to a promise, used by one task only.
private final class WeakPromise {
    private weak var promise: Promise<Int>?
    func set(_ p: Promise<Int>) { promise = p }
    var isFreed: Bool { promise == nil }
}
