import Foundation
import Synchronization
import CoroutinesTestSupport
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Plain mutable state, protected only by the primitive under test (a data race here is what the
/// test is meant to catch, also under ThreadSanitizer).
private final class Unprotected: @unchecked Sendable {
    var value = 0
    var inside = 0
    var maxInside = 0
}

// MARK: - CoroutineMutex

/// `CoroutineMutex`, as <doc:MutexSemaphoreAndWaitGroup> states it.
@Suite("CoroutineMutex")
struct SyncPrimitiveMutexTests {
    @Test("mutual exclusion across 1,000 coroutines on 4 schedulers, holding the lock across suspensions")
    func mutualExclusion() async throws {
        try await CK.withSchedulers(4, "mutex") { schedulers in
            let mutex = CoroutineMutex()
            let state = Unprotected()
            let violations = Kit.Counter()
            let cs = (0..<1_000).map { i in
                Coroutine.launch(on: schedulers[i % 4]) {
                    for _ in 0..<3 {
                        try mutex.withLock {
                            state.inside += 1
                            if state.inside != 1 { violations.increment() }
                            let v = state.value
                            try Coroutine.yield()          // suspend while holding the lock
                            state.value = v + 1
                            state.inside -= 1
                        }
                    }
                }
            }
            for c in cs { try await c.join() }
            #expect(cs.allSatisfy { $0.error == nil })
            #expect(violations.value == 0)
            #expect(try await Coroutine.async(on: schedulers[0]) { try mutex.withLock { state.value } }.value == 3_000)
        }
    }

    @Test("lock is granted in FIFO order")
    func fifo() async throws {
        let log = try await Kit.run { () -> [Int] in
            let mutex = CoroutineMutex()
            let log = Kit.Log<Int>()
            try mutex.lock()
            let cs = (1...5).map { i in
                Coroutine.launch {
                    try mutex.lock()
                    log.append(i)
                    try Coroutine.yield()
                    mutex.unlock()
                }
            }
            try CK.waitUntilSuspended(cs)
            // Late arrivals queue behind the waiters even though they run first after the unlock.
            mutex.unlock()
            let late = Coroutine.launch { try mutex.withLock { log.append(6) } }
            for c in cs { try c.join() }
            try late.join()
            return log.all
        }
        #expect(log == [1, 2, 3, 4, 5, 6])
    }

    @Test("a coroutine blocked in lock can be cancelled; the lock then goes to the next waiter")
    func cancellable() async throws {
        let log = try await Kit.run { () -> [String] in
            let mutex = CoroutineMutex()
            let log = Kit.Log<String>()
            try mutex.lock()
            let a = Coroutine.launch { log.append("A " + CK.outcome { try mutex.lock() }) }
            let b = Coroutine.launch {
                log.append("B " + CK.outcome { try mutex.lock() })
                mutex.unlock()
            }
            try CK.waitUntilSuspended([a, b])
            a.cancel()
            try a.join()
            mutex.unlock()
            try b.join()
            // The mutex is free again.
            let free = Coroutine.async { try mutex.withLock { "free" } }
            log.append(try free.await())
            return log.all
        }
        #expect(log == ["A cancelled", "B ok", "free"])
    }

    @Test("a lock handed over before the waiter's cancellation is kept (race rule): lock returns normally")
    func lockHandedOverThenCancelled() async throws {
        let log = try await Kit.run { () -> [String] in
            let mutex = CoroutineMutex()
            let log = Kit.Log<String>()
            try mutex.lock()
            let a = Coroutine.launch {
                log.append("A lock " + CK.outcome { try mutex.lock() })
                log.append("A next " + CK.outcome { try Coroutine.yield() })
                mutex.unlock()
            }
            try CK.waitUntilSuspended(a)
            mutex.unlock()     // hands the lock to A
            a.cancel()         // before A runs again
            try a.join()
            log.append(CK.outcome { try mutex.withLock {} })
            return log.all
        }
        #expect(log == ["A lock ok", "A next cancelled", "ok"])
    }

    @Test("relocking by the owner throws and keeps the lock held")
    func relockThrows() async throws {
        let log = try await Kit.run { () -> [String] in
            let mutex = CoroutineMutex()
            var log: [String] = []
            try mutex.lock()
            do {
                try mutex.lock()
                log.append("relock returned")
            } catch {
                log.append(error is CancellationError ? "relock cancelled" : "relock threw")
            }
            // Still held: another coroutine waits.
            let other = Coroutine.launch { try mutex.withLock {} }
            try CK.waitUntilSuspended(other)
            log.append("other waits")
            mutex.unlock()
            try other.join()
            log.append("other got it \(other.error == nil)")
            return log
        }
        #expect(log == ["relock threw", "other waits", "other got it true"])
    }

    @Test("withLock returns the body's value and unlocks when the body throws")
    func withLockUnlocksOnThrow() async throws {
        let log = try await Kit.run { () -> [String] in
            let mutex = CoroutineMutex()
            var log: [String] = []
            log.append(CK.result { try mutex.withLock { 42 } })
            log.append(CK.outcome { try mutex.withLock { throw CK.Failure(code: 2) } })
            log.append(CK.result { try mutex.withLock { "again" } })
            return log
        }
        #expect(log == ["42", "failure 2", "again"])
    }

    @Test("lock outside a coroutine throws notInCoroutine")
    func lockOutsideCoroutine() async throws {
        let outcome = try await Kit.onPlainThread { () -> [String] in
            let m = CoroutineMutex()
            return [CK.outcome { try m.lock() }, CK.outcome { try m.withLock {} }]
        }
        #expect(outcome == ["notInCoroutine", "notInCoroutine"])
    }
}

extension ChannelExitTests {
    @Test("unlocking a CoroutineMutex held by another coroutine traps")
    func unlockByNonOwner() async {
        await ChildProcess.run(.failure, id: "unlockByNonOwner") {
            try await Coroutine.run {
                let m = CoroutineMutex()
                let owner = Coroutine.launch { try m.lock(); try Coroutine.delay(hangBound) }
                try Coroutine.yield()
                _ = owner
                m.unlock()   // not the owner
            }
        }
    }
}

// MARK: - CoroutineSemaphore

/// `CoroutineSemaphore`, as <doc:MutexSemaphoreAndWaitGroup> states it.
@Suite("CoroutineSemaphore")
struct SyncPrimitiveSemaphoreTests {
    @Test("the number of holders never exceeds the permits, across 4 schedulers", arguments: [1, 3])
    func boundNeverExceeded(permits: Int) async throws {
        try await CK.withSchedulers(4, "semaphore") { schedulers in
            let sem = CoroutineSemaphore(permits: permits)
            let inside = Atomic<Int>(0)
            let maxInside = Atomic<Int>(0)
            let cs = (0..<200).map { i in
                Coroutine.launch(on: schedulers[i % 4]) {
                    try sem.acquire()
                    let now = inside.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
                    maxInside.max(now, ordering: .sequentiallyConsistent)
                    try Coroutine.delay(.microseconds(200))
                    inside.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                    sem.release()
                }
            }
            for c in cs { try await c.join() }
            #expect(cs.allSatisfy { $0.error == nil })
            #expect(maxInside.load(ordering: .relaxed) <= permits)
            #expect(maxInside.load(ordering: .relaxed) == permits)   // and it was used fully
        }
    }

    @Test("waiters get permits in FIFO order")
    func fifo() async throws {
        let log = try await Kit.run { () -> [Int] in
            let sem = CoroutineSemaphore(permits: 0)
            let log = Kit.Log<Int>()
            let cs = (1...5).map { i in Coroutine.launch { try sem.acquire(); log.append(i) } }
            try CK.waitUntilSuspended(cs)
            // A late arrival must not overtake the queued waiters.
            for _ in 0..<5 { sem.release() }
            let late = Coroutine.launch { try sem.acquire(); log.append(6) }
            try CK.waitUntilSuspended(late)
            sem.release()
            for c in cs { try c.join() }
            try late.join()
            return log.all
        }
        #expect(log == [1, 2, 3, 4, 5, 6])
    }

    @Test("a coroutine blocked in acquire can be cancelled; the permit goes to the next waiter")
    func cancellable() async throws {
        let log = try await Kit.run { () -> [String] in
            let sem = CoroutineSemaphore(permits: 0)
            let log = Kit.Log<String>()
            let a = Coroutine.launch { log.append("A " + CK.outcome { try sem.acquire() }) }
            let b = Coroutine.launch { log.append("B " + CK.outcome { try sem.acquire() }) }
            try CK.waitUntilSuspended([a, b])
            a.cancel()
            try a.join()
            sem.release()
            try b.join()
            // One more release is kept for later: an acquire then succeeds without waiting.
            sem.release()
            let c = Coroutine.launch { log.append("C " + CK.outcome { try sem.acquire() }) }
            try c.join()
            return log.all
        }
        #expect(log == ["A cancelled", "B ok", "C ok"])
    }

    @Test("a cancelled coroutine's acquire throws at once and takes no permit")
    func acquireInCancelledCoroutine() async throws {
        let log = try await Kit.run { () -> [String] in
            let sem = CoroutineSemaphore(permits: 1)
            let log = Kit.Log<String>()
            let a = Coroutine.launch {
                Coroutine.current!.cancel()
                log.append("A " + CK.outcome { try sem.acquire() })
            }
            try a.join()
            // The permit is still there.
            let b = Coroutine.launch { log.append("B " + CK.outcome { try sem.acquire() }) }
            try b.join()
            return log.all
        }
        #expect(log == ["A cancelled", "B ok"])
    }

    @Test("a permit handed over before the waiter's cancellation is kept (race rule)")
    func permitHandedOverThenCancelled() async throws {
        let log = try await Kit.run { () -> [String] in
            let sem = CoroutineSemaphore(permits: 0)
            let log = Kit.Log<String>()
            let a = Coroutine.launch {
                log.append("A " + CK.outcome { try sem.acquire() })
                sem.release()
            }
            try CK.waitUntilSuspended(a)
            sem.release()
            a.cancel()
            try a.join()
            // A gave the permit back: it was not lost.
            let b = Coroutine.launch { log.append("B " + CK.outcome { try sem.acquire() }) }
            try b.join()
            return log.all
        }
        #expect(log == ["A ok", "B ok"])
    }

    @Test("acquire outside a coroutine throws notInCoroutine")
    func acquireOutsideCoroutine() async throws {
        let outcome = try await Kit.onPlainThread { CK.outcome { try CoroutineSemaphore(permits: 1).acquire() } }
        #expect(outcome == "notInCoroutine")
    }
}

// MARK: - WaitGroup

/// `WaitGroup`, as <doc:MutexSemaphoreAndWaitGroup> states it.
@Suite("WaitGroup")
struct SyncPrimitiveWaitGroupTests {
    @Test("wait returns for every waiter once the count reaches zero, and not before")
    func releasesAllWaiters() async throws {
        try await CK.withSchedulers(2, "waitgroup") { schedulers in
            let log = try await Kit.run { () -> [String] in
                let wg = WaitGroup()
                let log = Kit.Log<String>()
                wg.add(3)
                // Ten waiters on three threads.
                let waiters = (0..<10).map { i in
                    Coroutine.launch(on: i < 4 ? nil : schedulers[i % 2]) {
                        try wg.wait()
                        log.append("released")
                    }
                }
                try CK.waitUntilSuspended(waiters)
                // Workers on other threads finish one after another.
                for i in 0..<3 {
                    try Coroutine.async(on: schedulers[i % 2]) { wg.done() }.await()
                    if i < 2 {
                        try Coroutine.delay(.milliseconds(5))
                        log.append("after done \(i + 1): \(waiters.filter { $0.isFinished }.count) finished")
                    }
                }
                for w in waiters { try w.join() }
                return log.all
            }
            #expect(log == ["after done 1: 0 finished", "after done 2: 0 finished"]
                    + Array(repeating: "released", count: 10))
        }
    }

    @Test("wait with a zero count returns at once, without suspending")
    func zeroCountReturnsAtOnce() async throws {
        let (peerRan, outcomes) = try await Kit.run { () -> (Int, [String]) in
            let peerRan = Kit.Counter()
            Coroutine.launch { peerRan.increment() }
            let fresh = WaitGroup()
            var outcomes = [CK.outcome { try fresh.wait() }]
            let used = WaitGroup()
            used.add(2)
            used.done()
            used.done()
            outcomes.append(CK.outcome { try used.wait() })
            return (peerRan.value, outcomes)
        }
        #expect(peerRan == 0)
        #expect(outcomes == ["ok", "ok"])
    }

    @Test("add and done from plain threads release a waiting coroutine")
    func fromPlainThreads() async throws {
        try await Kit.withScheduler("waitgroup-plain") { s in
            let wg = WaitGroup()
            wg.add(8)
            let waiter = Coroutine.launch(on: s) { try wg.wait() }
            try await Kit.onPlainThreads(8) { _ in
                wg.add(2)
                wg.done()
                wg.done()
                wg.done()
            }
            try await waiter.join()
            #expect(waiter.error == nil)
        }
    }

    @Test("a waiter can be cancelled; the others are still released")
    func cancellable() async throws {
        let log = try await Kit.run { () -> [String] in
            let wg = WaitGroup()
            wg.add(1)
            let log = Kit.Log<String>()
            let a = Coroutine.launch { log.append("A " + CK.outcome { try wg.wait() }) }
            let b = Coroutine.launch { log.append("B " + CK.outcome { try wg.wait() }) }
            try CK.waitUntilSuspended([a, b])
            a.cancel()
            try a.join()
            wg.done()
            try b.join()
            return log.all
        }
        #expect(log == ["A cancelled", "B ok"])
    }

    @Test("wait outside a coroutine throws notInCoroutine")
    func waitOutsideCoroutine() async throws {
        let outcome = try await Kit.onPlainThread { () -> String in
            let wg = WaitGroup()
            wg.add(1)
            return CK.outcome { try wg.wait() }
        }
        #expect(outcome == "notInCoroutine")
    }
}
