import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Channel wait queues under races: hand-offs, `close`, cancellation and timeouts meeting across
/// threads (<doc:ChannelsAndSelect>). Each test checks that every value is delivered exactly
/// once, and every waiter ends exactly once.
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("Channel wait queues under races", .serialized)
struct ChannelWaitQueueStressTests {
    // MARK: Wakes across threads and close

    /// Found in review 10 (channel hand-offs wake claimed coroutines without retaining them).
    @Test("rendezvous ping-pong across two schedulers, handles dropped: every value once, nothing leaked")
    func crossSchedulerPingPong() async throws {
        try await ChannelTestKit.withSchedulers(2, "r10") { s in
            let (a, b) = (s[0], s[1])
            let weak = Kit.WeakCoroutines()
            let sum = Kit.Counter()
            let done = WaitGroup()
            let pairs = 16, n = 300
            done.add(2 * pairs)
            for p in 0..<pairs {
                let ping = Channel<Int>(), pong = Channel<Int>()
                weak.add(Coroutine.launch(on: a) {
                    defer { done.done() }
                    for i in 0..<n { try ping.send(i); _ = try pong.receive() }
                    _ = ping.close()
                })
                weak.add(Coroutine.launch(on: p % 2 == 0 ? b : a) {
                    defer { done.done() }
                    for v in ping { sum.increment(); try pong.send(v) }
                })
            }
            try await Kit.onPlainThread { try Coroutine.runBlocking { try done.wait() } }
            #expect(sum.value == pairs * n)
            #expect(await Kit.eventually { weak.alive == 0 })
        }
    }

    /// Found in review 10 (`close` chains the claimed records of the waiters it wakes).
    @Test("close races cancellation and timeouts of waiters on other schedulers: each waiter ends exactly once")
    func closeRacesCancelAndTimeout() async throws {
        try await ChannelTestKit.withSchedulers(2, "r10-w") { s in
            let (a, b) = (s[0], s[1])
            for round in 0..<30 {
                let ch = Channel<Int>()
                let ends = Kit.Counter()
                let closedSeen = Kit.Counter()
                let waiters = (0..<8).map { k in
                    Coroutine.launch(on: k % 2 == 0 ? a : b) {
                        defer { ends.increment() }
                        do {
                            if k % 4 == 3 {
                                try ch.send(k)
                            } else if k % 4 == 2 {
                                _ = try Coroutine.withTimeout(.microseconds(50 * (round % 5))) { try ch.receive() }
                            } else {
                                _ = try ch.receive()
                            }
                        } catch ChannelError.closed {
                            closedSeen.increment()
                        } catch is CancellationError {
                        } catch CoroutineError.timedOut {
                        }
                    }
                }
                let disruptor = Coroutine.launch(on: round % 2 == 0 ? b : a) {
                    for (i, w) in waiters.enumerated() where i % 4 == 1 { w.cancel() }
                    _ = ch.close()
                }
                for w in waiters { try await w.join() }
                try await disruptor.join()
                // A waiter cancelled before it started never runs its body.
                let unstarted = waiters.filter { $0.error is CancellationError }.count
                #expect(ends.value + unstarted == 8)
                for (i, w) in waiters.enumerated() { #expect(w.error == nil || (i % 4 == 1 && w.error is CancellationError)) }
            }
        }
    }

    /// Found in review 10 (`close` chains the claimed records of the waiters it wakes).
    @Test("close from a plain thread wakes a hundred waiters on two schedulers, chained; all see the close")
    func closeWakesManyChained() async throws {
        try await ChannelTestKit.withSchedulers(2, "r10-c") { s in
            let (a, b) = (s[0], s[1])
            for _ in 0..<10 {
                let ch = Channel<Int>()
                let blocked = WaitGroup()
                let closed = Kit.Counter()
                blocked.add(50)
                let waiters = (0..<100).map { k in
                    Coroutine.launch(on: k % 2 == 0 ? a : b) {
                        // A big frame, so that a record read after its owner resumed would be
                        // overwritten at once.
                        do {
                            if k % 2 == 0 {
                                try select { s in
                                    s.receive(from: ch) { _ in () }
                                    s.timeout(after: .seconds(30)) { () }
                                }
                                // select runs the receive body with nil on close
                                closed.increment()
                            } else {
                                blocked.done()
                                _ = try ch.receive()
                            }
                        } catch ChannelError.closed {
                            closed.increment()
                        }
                        var junk = [UInt8](repeating: UInt8(k & 0xFF), count: 512)
                        junk.withUnsafeMutableBytes { p in _ = Kit.opaque(p.count) }
                    }
                }
                // Let the odd ones block (the even ones may or may not have queued yet).
                try await Kit.onPlainThread { try Coroutine.runBlocking { try blocked.wait() } }
                _ = ch.close()
                for w in waiters { try await w.join() }
                #expect(closed.value == 100)
            }
        }
    }

    // MARK: Bridged (async) operations

    /// Found in review 11 (a coroutine that never runs borrows its scheduler and tells its
    /// unretained observers, a promise, channel or mailbox, exactly once).
    @Test("async channel receives (bridge coroutines) cancelled at every moment: each task ends once, no value lost")
    func bridgeCancelRaces() async throws {
        let ch = Channel<Int>(capacity: .unbounded)
        let sent = 300
        for i in 0..<sent { try await ch.send(i) }
        let got = Kit.Log<Int>()
        let cancelled = Kit.Counter()
        try await withThrowingTaskGroup(of: Void.self) { g in
            for k in 0..<600 {
                let task = Task {
                    do { got.append(try await ch.receive()) } catch is CancellationError { cancelled.increment() }
                }
                g.addTask {
                    for _ in 0..<(k % 9) * 30 { _ = Kit.opaque(0) }
                    task.cancel()
                    _ = await task.result
                }
            }
            try await g.waitForAll()
        }
        _ = ch.close()
        var rest: [Int] = []
        while let v = try? ch.tryReceive() { rest.append(v) }   // nil or closed once drained
        let all = got.all + rest
        #expect(got.all.count + cancelled.value == 600)
        #expect(all.sorted() == Array(0..<sent), "\(all.count) values of \(sent)")
    }
}
