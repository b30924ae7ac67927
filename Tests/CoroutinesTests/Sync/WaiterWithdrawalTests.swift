import Foundation
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Withdrawal from long waiter queues (`WaiterList.withdraw`): cancelled waiters leave tombstones
/// that pops skip and that are dropped in bulk, so the queue stays FIFO among the live waiters and
/// its size proportional to them.
@Suite("Withdrawal from long waiter queues", .serialized)
struct WaiterWithdrawalTests {
    @Test("1,000 coroutines await a promise and 900 are cancelled: the queue shrinks to about its live waiters, and the 100 still get the value")
    func cancelledAwaitersLeaveNoPile() async throws {
        let s = CoroutineScheduler(name: "withdraw-promise")
        defer { s.stop() }
        let p = Promise<Int>()
        // Given 1,000 coroutines waiting for one promise
        let waiters = (0..<1_000).map { _ in Coroutine.async(on: s) { try p.await() } }
        #expect(await Kit.eventually { p.withState { $0.coroutines.entryCount } == 1_000 })
        // When 900 of them are cancelled (all but every tenth)
        for (i, w) in waiters.enumerated() where i % 10 != 0 { w.cancel() }
        for (i, w) in waiters.enumerated() where i % 10 != 0 {
            await #expect(throws: CancellationError.self) { try await w.value }
        }
        // Then, once they have withdrawn (a cancelled promise of `async` is rejected before its
        // coroutine unwinds), the queue holds at most about twice its live waiters
        let bound = 2 * 100 + WaiterListOverflow<WaitTicket>.exactWithdrawalLimit
        #expect(await Kit.eventually { p.withState { $0.coroutines.entryCount } <= bound },
                "\(p.withState { $0.coroutines.entryCount }) entries for 100 waiters")
        // And the others still get the value
        p.fulfill(7)
        for (i, w) in waiters.enumerated() where i % 10 == 0 { #expect(try await w.value == 7) }
    }

    @Test("a mutex queue of 300 with every other waiter cancelled hands the lock to the others in FIFO order")
    func mutexSkipsTombstonesInOrder() async throws {
        let s = CoroutineScheduler(name: "withdraw-mutex")
        defer { s.stop() }
        let mutex = CoroutineMutex()
        let order = Kit.Log<Int>()
        let held = Promise<Void>()
        let release = Promise<Void>()
        // Given a holder, and 300 coroutines queued on the mutex in order
        let holder = Coroutine.launch(on: s) {
            try mutex.lock()
            held.fulfill(())
            try release.await()
            mutex.unlock()
        }
        try await held.value
        let queued = (0..<300).map { i in
            Coroutine.launch(on: s) {
                try mutex.lock()
                order.append(i)
                mutex.unlock()
            }
        }
        #expect(await Kit.eventually { mutex.state.locked { $0.waiters.entryCount } == 300 })
        // When every odd one is cancelled while it waits, then the holder unlocks
        for (i, c) in queued.enumerated() where i % 2 == 1 { c.cancel() }
        for (i, c) in queued.enumerated() where i % 2 == 1 { try await c.join() }
        #expect(mutex.state.locked { $0.waiters.entryCount } <= 150 * 2 + WaiterListOverflow<WaitTicket>.exactWithdrawalLimit + 1)
        release.fulfill(())
        try await holder.join()
        for c in queued { try await c.join() }
        // Then the even ones took the lock, each once, in the order they queued
        #expect(order.all == Array(stride(from: 0, to: 300, by: 2)))
    }
}
