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

    @Test("1,000 coroutines join one coroutine and 900 are cancelled: its joiner queue shrinks to about its live joiners, and the 100 are woken in the order they joined")
    func cancelledJoinersLeaveNoPile() async throws {
        let s = CoroutineScheduler(name: "withdraw-join")
        defer { s.stop() }
        let release = Promise<Void>()
        let order = Kit.Log<Int>()
        let target = Coroutine.launch(on: s) { try release.await() }
        // Given 1,000 coroutines joining it
        let joiners = (0..<1_000).map { i in
            Coroutine.launch(on: s) {
                try target.join()
                order.append(i)
            }
        }
        #expect(await Kit.eventually { target.withShared { $0.joiners.count } == 1_000 })
        // When 900 of them are cancelled while they wait (all but every tenth)
        for (i, j) in joiners.enumerated() where i % 10 != 0 { j.cancel() }
        for (i, j) in joiners.enumerated() where i % 10 != 0 { try await j.join() }
        // Then the queue holds at most about twice its live joiners
        let bound = 2 * 100 + WaiterListOverflow<WaitTicket>.exactWithdrawalLimit
        let entries = target.withShared { $0.joiners.count }
        #expect(entries <= bound, "\(entries) entries for 100 joiners")
        // And the 100 are woken when the target finishes, in the order they joined
        release.fulfill(())
        for j in joiners { try await j.join() }
        #expect(order.all == Array(stride(from: 0, to: 1_000, by: 10)))
        #expect(target.withShared { $0.joiners.count } == 0)
    }

    @Test("1,000 tasks join one coroutine and 900 are cancelled: each removes exactly its own entry, and the 100 are woken")
    func cancelledTaskJoinersRemoveTheirOwnEntry() async throws {
        let s = CoroutineScheduler(name: "withdraw-task-join")
        defer { s.stop() }
        let release = Promise<Void>()
        let target = Coroutine.launch(on: s) { try release.await() }
        // Given 1,000 tasks joining it
        let tasks = (0..<1_000).map { _ in Task { try await target.join() } }
        #expect(await Kit.eventually { target.withShared { $0.joiners.count } == 1_000 })
        // When 900 are cancelled
        for (i, t) in tasks.enumerated() where i % 10 != 0 { t.cancel() }
        for (i, t) in tasks.enumerated() where i % 10 != 0 {
            await #expect(throws: CancellationError.self) { try await t.value }
        }
        // Then exactly the 100 others are left, and they are woken when it finishes
        #expect(target.withShared { $0.joiners.count } == 100)
        release.fulfill(())
        for (i, t) in tasks.enumerated() where i % 10 == 0 { try await t.value }
    }

    @Test("1,000 tasks await a promise's value and 900 are cancelled: exactly 100 live waiters are left among at most about twice as many entries, and they get the value")
    func cancelledTaskAwaitersRemoveTheirOwnEntry() async throws {
        let p = Promise<Int>()
        // Given 1,000 tasks awaiting the promise
        let tasks = (0..<1_000).map { _ in Task { try await p.value } }
        #expect(await Kit.eventually { p.testWaiterCount == 1_000 })
        // When 900 are cancelled
        for (i, t) in tasks.enumerated() where i % 10 != 0 { t.cancel() }
        for (i, t) in tasks.enumerated() where i % 10 != 0 {
            await #expect(throws: CancellationError.self) { try await t.value }
        }
        // Then exactly the 100 others wait, the withdrawn ones' tombstones have been dropped down
        // to fewer than the live waiters, and the 100 get the value
        #expect(p.testWaiterCount == 100)
        #expect(p.testOtherEntryCount >= 100 && p.testOtherEntryCount <= 2 * 100,
                "\(p.testOtherEntryCount) entries for 100 waiters")
        p.fulfill(7)
        for (i, t) in tasks.enumerated() where i % 10 == 0 { #expect(try await t.value == 7) }
    }

    @Test("100 tasks await a promise's value and 40 are cancelled: their tombstones stay until the settlement, which skips them and resumes the 60 once each")
    func taskTombstonesAreSkippedAtSettlement() async throws {
        let p = Promise<Int>()
        // Given 100 tasks awaiting the promise
        let tasks = (0..<100).map { _ in Task { try await p.value } }
        #expect(await Kit.eventually { p.testWaiterCount == 100 })
        // When 40 are cancelled (fewer than half: no tombstone is dropped yet)
        for (i, t) in tasks.enumerated() where i % 5 < 2 { t.cancel() }
        for (i, t) in tasks.enumerated() where i % 5 < 2 {
            await #expect(throws: CancellationError.self) { try await t.value }
        }
        #expect(p.testWaiterCount == 60)
        #expect(p.testOtherEntryCount == 100)
        // Then fulfilling resumes the 60 with the value (a tombstone resumed again would trap:
        // its checked continuation was already resumed by the cancellation)
        p.fulfill(3)
        for (i, t) in tasks.enumerated() where i % 5 >= 2 { #expect(try await t.value == 3) }
        #expect(p.testOtherEntryCount == 0)
    }

    @Test("tasks withdraw one by one among observers: each withdrawal leaves one tombstone or drops them all, never an observer nor a waiting task; the observers then run in registration order and the tasks left get the value")
    func taskTombstonesAmongObservers() async throws {
        try await Kit.withScheduler("withdraw-among-observers") { s in
            let p = Promise<Int>()
            let ran = Kit.Log<String>()
            var observers: [Promise<Void>] = []
            var live: [Task<Int, any Error>] = []
            var drops = 0
            var rng = SystemRandomNumberGenerator()
            // Given, six times, an observer registered from a coroutine on s (so they all run on
            // s, in registration order) followed by 8 tasks awaiting the promise
            for round in 0..<6 {
                observers.append(try await Kit.onSchedulerLoop(s) {
                    p.then { v in ran.append("observer \(round): \(v)") }
                })
                let tasks = (0..<8).map { _ in Task { try await p.value } }
                try await waitUntil("8 more tasks wait") { p.testWaiterCount == round + 1 + live.count + 8 }
                // When 6 of the 8 are cancelled, one at a time, in a random order
                let cancelled = Set((0..<8).shuffled(using: &rng).prefix(6))
                for i in cancelled.shuffled(using: &rng) {
                    let before = p.testOtherEntries
                    tasks[i].cancel()
                    await #expect(throws: CancellationError.self) { try await tasks[i].value }
                    // Then the state counts its tombstones exactly, and either this withdrawal added
                    // one or the tombstones were all dropped; observers and waiting tasks stay in order
                    let after = p.testOtherEntries
                    func count(_ c: Character, _ layout: String) -> Int { layout.filter { $0 == c }.count }
                    let tombstones = count("x", after.layout)
                    #expect(after.withdrawnTasks == tombstones, "\(after)")
                    #expect(2 * tombstones <= after.layout.count, "\(after)")
                    #expect(count("o", after.layout) == count("o", before.layout), "\(before) -> \(after)")
                    #expect(count("t", after.layout) == count("t", before.layout) - 1, "\(before) -> \(after)")
                    if tombstones == 0 {
                        drops += 1
                    } else {
                        #expect(tombstones == before.withdrawnTasks + 1, "\(before) -> \(after)")
                        #expect(after.layout.count == before.layout.count, "\(before) -> \(after)")
                    }
                }
                live += tasks.indices.filter { !cancelled.contains($0) }.map { tasks[$0] }
                let layout = p.testOtherEntries.layout
                #expect(layout.filter { $0 == "o" }.count == round + 1, "\(layout)")
                #expect(layout.filter { $0 == "t" }.count == live.count, "\(layout)")
            }
            #expect(drops > 0, "no bulk drop of tombstones happened")
            // When the promise is fulfilled
            p.fulfill(7)
            // Then the observers ran once each in registration order, and the 12 tasks left got the value
            try await waitUntil("the observers ran") { observers.allSatisfy { !$0.isPending } }
            #expect(ran.all == (0..<6).map { "observer \($0): 7" })
            for t in live { #expect(try await t.value == 7) }
            #expect(p.testOtherEntries.layout == "" && p.testOtherEntries.withdrawnTasks == 0)
        }
    }

    @Test("200 coroutines wait for one descriptor and 150 are cancelled: its waiter list shrinks to about its live waiters, readiness wakes the 50, and the descriptor is dropped")
    func cancelledDescriptorWaitersLeaveNoPile() async throws {
        let s = CoroutineScheduler(name: "withdraw-fd")
        defer { s.stop() }
        let (r, w) = try Kit.makePipe()
        defer { close(r); close(w) }
        // Reads the scheduler-confined waiter table on its own thread.
        func readerEntries() async throws -> Int {
            try await Coroutine.async(on: s) { s.ioWaiters[r]?.readers.entryCount ?? 0 }.value
        }
        // Given 200 coroutines waiting until the empty pipe is readable
        let woken = Kit.Counter()
        let waiters = (0..<200).map { _ in
            Coroutine.launch(on: s) {
                try Coroutine.waitUntilReadable(r)
                woken.increment()
            }
        }
        var entries = 0
        for _ in 0..<6_000 where entries != 200 {
            entries = try await readerEntries()
            if entries != 200 { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(entries == 200)
        // When 150 of them are cancelled (three of every four)
        for (i, c) in waiters.enumerated() where i % 4 != 0 { c.cancel() }
        for (i, c) in waiters.enumerated() where i % 4 != 0 { try await c.join() }
        // Then at most about twice the live waiters are held, and none of them was woken
        entries = try await readerEntries()
        #expect(entries <= 2 * 50 + WaiterListOverflow<WaitTicket>.exactWithdrawalLimit, "\(entries) entries for 50 waiters")
        #expect(woken.value == 0)
        // And readiness wakes the 50, after which the scheduler holds nothing for the descriptor
        var byte: UInt8 = 1
        #expect(write(w, &byte, 1) == 1)
        for (i, c) in waiters.enumerated() where i % 4 == 0 { try await c.join(); #expect(c.error == nil) }
        #expect(woken.value == 50)
        #expect(try await Coroutine.async(on: s) { s.ioWaiters[r] == nil }.value)
    }

    /// The poll events the kernel holds for `fd` in any epoll instance of this process (from
    /// `/proc/self/fdinfo`), or nil if none holds it.
    static func epollEvents(for fd: Int32) -> UInt32? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fdinfo") else { return nil }
        for entry in entries {
            guard let text = try? String(contentsOfFile: "/proc/self/fdinfo/\(entry)", encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") where line.hasPrefix("tfd:") {
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count >= 4, Int32(fields[1]) == fd, fields[2] == "events:" else { continue }
                return UInt32(fields[3], radix: 16)
            }
        }
        return nil
    }

    @Test("readers and writers wait on one socket and every reader and all writers but one are cancelled: readable interest is dropped, and the remaining writer is still woken when the socket becomes writable")
    func mixedDescriptorWaitersWithdrawn() async throws {
        let s = CoroutineScheduler(name: "withdraw-fd-mixed")
        defer { s.stop() }
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        let (mine, peer) = (pair[0], pair[1])
        defer { close(mine); close(peer) }
        for fd in pair { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        Kit.fill(pipeWriteEnd: mine)   // not writable; nothing to read either
        func waiting() async throws -> (readers: Int, writers: Int) {
            try await Coroutine.async(on: s) {
                (s.ioWaiters[mine]?.readers.entryCount ?? 0, s.ioWaiters[mine]?.writers.entryCount ?? 0)
            }.value
        }
        // Given 40 readers and 40 writers waiting on the same socket
        let readers = (0..<40).map { _ in Coroutine.launch(on: s) { try Coroutine.waitUntilReadable(mine) } }
        let writers = (0..<40).map { _ in Coroutine.launch(on: s) { try Coroutine.waitUntilWritable(mine) } }
        var counts = (readers: 0, writers: 0)
        for _ in 0..<6_000 where counts != (40, 40) {
            counts = try await waiting()
            if counts != (40, 40) { try await Task.sleep(for: .milliseconds(10)) }
        }
        try #require(counts == (40, 40))
        // When every reader and every writer but the 17th are cancelled (leaving tombstones
        // around it), from the back and the front alternately
        for (i, w) in writers.enumerated().reversed() where i != 17 && i % 2 == 0 { w.cancel() }
        for r in readers.reversed() { r.cancel() }
        for (i, w) in writers.enumerated() where i != 17 && i % 2 == 1 { w.cancel() }
        for r in readers { try await r.join(); #expect(r.error is CancellationError) }
        for (i, w) in writers.enumerated() where i != 17 { try await w.join(); #expect(w.error is CancellationError) }
        // Then no reader is left and the poller no longer asks for readability, only writability
        counts = try await waiting()
        #expect(counts.readers == 0)
        #expect(counts.writers >= 1)
        let events = try #require(try await Coroutine.async(on: s) { Self.epollEvents(for: mine) }.value)
        #expect(events & UInt32(0x001) /* EPOLLIN */ == 0, "readable interest left: events \(String(events, radix: 16))")
        #expect(events & UInt32(0x004) /* EPOLLOUT */ != 0, "writable interest lost: events \(String(events, radix: 16))")
        // And when the peer drains the socket, the remaining writer is woken
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while buffer.withUnsafeMutableBytes({ read(peer, $0.baseAddress, $0.count) }) > 0 {}
        try await writers[17].join()
        #expect(writers[17].error == nil)
        #expect(try await Coroutine.async(on: s) { s.ioWaiters[mine] == nil }.value)
    }

}
