import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Cancelling coroutines blocked in channel operations: see the ChannelsAndSelect and Cancellation
/// articles (<doc:ChannelsAndSelect>, <doc:Cancellation>).
@Suite("Channel cancellation")
struct ChannelCancellationTests {
    @Test("a cancelled blocked receiver throws CancellationError and never consumes a later value",
          arguments: TestCapacity.allCases)
    func cancelBlockedReceiver(capacity: TestCapacity) async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch = Channel<Int>(capacity: capacity.capacity)
            // Given three receivers blocked in FIFO order on an empty channel.
            let rs = (0..<3).map { i in
                Coroutine.launch { log.append("r\(i) " + CK.result { try ch.receive() }) }
            }
            try CK.waitUntilSuspended(rs)
            // When the middle one is cancelled.
            rs[1].cancel()
            try rs[1].join()
            // Then it threw CancellationError, and the next two values go to the other two, in order.
            try ch.send(10)
            try ch.send(11)
            try rs[0].join()
            try rs[2].join()
            // And no receiver is left behind: the channel has nobody to hand a value to.
            if capacity == .rendezvous {
                log.append("trySend \(try ch.trySend(12))")
            } else {
                log.append("trySend \(try ch.trySend(12)) count \(ch.count)")
            }
            return log.all
        }
        let tail = capacity == .rendezvous ? "trySend false" : "trySend true count 1"
        #expect(log == ["r1 cancelled", "r0 10", "r2 11", tail])
    }

    @Test("a cancelled blocked sender throws CancellationError and its value is never delivered",
          arguments: TestCapacity.bounded)
    func cancelBlockedSender(capacity: TestCapacity) async throws {
        let (senders, received) = try await Kit.run { () -> ([String], [String]) in
            let log = Kit.Log<String>()
            let ch = Channel<Int>(capacity: capacity.capacity)
            for i in 0..<capacity.room { try ch.send(i) }
            // Given three senders blocked in FIFO order on a full channel.
            let ss = (100..<103).map { v in
                Coroutine.launch { log.append("\(v) " + CK.outcome { try ch.send(v) }) }
            }
            try CK.waitUntilSuspended(ss)
            // When the middle one is cancelled.
            ss[1].cancel()
            try ss[1].join()
            // Then its value is never received; the others arrive in order after the buffer.
            var received: [String] = []
            for _ in 0..<(capacity.room + 2) { received.append("\(try ch.receive())") }
            for s in ss { try s.join() }
            received.append(CK.result { try ch.tryReceive() })
            ch.close()
            received.append(CK.result { try ch.tryReceive() })
            return (log.all, received)
        }
        #expect(senders == ["101 cancelled", "100 ok", "102 ok"])
        #expect(received == (0..<capacity.room).map { "\($0)" } + ["100", "102", "nil", "closed"])
    }

    @Test("cancelling a blocked receiver on another thread wakes it with CancellationError",
          arguments: TestCapacity.allCases)
    func cancelReceiverAcrossThreads(capacity: TestCapacity) async throws {
        try await Kit.withScheduler("cancel-recv-thread") { other in
            let ch = Channel<Int>(capacity: capacity.capacity)
            let r = Coroutine.async(on: other) { try ch.receive() }
            let outcome = try await Kit.run { () -> String in
                try Coroutine.delay(.milliseconds(5))
                r.cancel()
                return CK.result { try r.await() }
            }
            #expect(outcome == "cancelled")
            // Nobody is left waiting on the channel.
            if capacity == .rendezvous { #expect(try !ch.trySend(1)) }
        }
    }

    @Test("a cancelled coroutine's send and receive throw at once even when they could complete, and change nothing")
    func operationsInCancelledCoroutine() async throws {
        let (log, count) = try await Kit.run { () -> ([String], Int) in
            let ch = Channel<Int>(capacity: 2)
            try ch.send(1)
            let log = Kit.Log<String>()
            let c = Coroutine.launch {
                Coroutine.current!.cancel()
                log.append("receive " + CK.result { try ch.receive() })
                log.append("send " + CK.outcome { try ch.send(2) })
                log.append("select " + CK.result {
                    let v: Int = try select { s in s.receive(from: ch) { $0 ?? -1 } }
                    return v
                })
                // try… never check cancellation.
                log.append("trySend " + CK.result { try ch.trySend(3) })
                log.append("tryReceive " + CK.result { try ch.tryReceive() })
            }
            try c.join()
            return (log.all, ch.count)
        }
        #expect(log == ["receive cancelled", "send cancelled", "select cancelled", "trySend true", "tryReceive Optional(1)"])
        #expect(count == 1)
    }

    // MARK: The race between completion and cancellation (<doc:Cancellation>)

    @Test("a receive a peer already completed returns the value; the cancellation hits the next suspending call",
          arguments: TestCapacity.allCases)
    func receiveCompletedBeforeCancel(capacity: TestCapacity) async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch = Channel<Int>(capacity: capacity.capacity)
            let a = Coroutine.launch {
                log.append("A got " + CK.result { try ch.receive() })
                log.append("A next " + CK.outcome { try Coroutine.yield() })
            }
            try CK.waitUntilSuspended(a)
            // B hands A the value, then cancels A before A runs again.
            Coroutine.launch {
                try ch.send(7)
                a.cancel()
                log.append("B sent and cancelled")
            }
            try a.join()
            log.append("count \(ch.count)")
            return log.all
        }
        #expect(log == ["B sent and cancelled", "A got 7", "A next cancelled", "count 0"])
    }

    /// The race between completion and a timeout, as <doc:Cancellation> states it.
    ///
    /// A regression test: it failed before its fix.
    @Test("a receive that completed as its timeout fired still returns its value")
    func completedReceiveInExpiredScopeKeepsItsValue() async throws {
        // The value is handed over before the scope's deadline passes; the body then spins past
        // the deadline without suspending: withTimeout returns the value.
        let value = try await CoroutineTestKit.run { () -> Int in
            let channel = Channel<Int>(capacity: 1)
            try channel.send(5)
            return try Coroutine.withTimeout(.milliseconds(5)) { () -> Int in
                let v = try channel.receive()
                let end = ContinuousClock.now + .milliseconds(10)
                while ContinuousClock.now < end {}
                return v
            }
        }
        #expect(value == 5)
    }

    @Test("a send a peer already completed returns normally; the cancellation hits the next suspending call",
          arguments: TestCapacity.bounded)
    func sendCompletedBeforeCancel(capacity: TestCapacity) async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch = Channel<Int>(capacity: capacity.capacity)
            for i in 0..<capacity.room { try ch.send(i) }
            let a = Coroutine.launch {
                log.append("A send " + CK.outcome { try ch.send(99) })
                log.append("A next " + CK.outcome { try Coroutine.yield() })
            }
            try CK.waitUntilSuspended(a)
            // B receives (making room or taking A's value), then cancels A before A runs again.
            Coroutine.launch {
                let v = try ch.receive()
                a.cancel()
                log.append("B got \(v) and cancelled")
            }
            try a.join()
            // A's value was delivered (it is the last one in the channel, or B took it).
            let rest = CK.drain(ch).values
            log.append("rest \(rest)")
            return log.all
        }
        let first = capacity == .rendezvous ? 99 : 0
        let rest = capacity == .rendezvous ? [] : Array(1..<capacity.room) + [99]
        #expect(log == ["B got \(first) and cancelled", "A send ok", "A next cancelled", "rest \(rest)"])
    }

    @Test("cross-thread race of trySend and cancel on a blocked receiver: exactly one wins", arguments: [0, 3])
    func trySendRacesCancel(capacity: Int) async throws {
        try await CK.withSchedulers(2, "try-vs-cancel") { schedulers in
            var deliveredWins = 0, cancelWins = 0
            for round in 0..<200 {
                let ch = Channel<Int>(capacity: capacity)
                // Given a receiver blocked on an empty channel on one thread.
                let got = Kit.Box<Result<Int, any Error>?>(nil)
                let r = Coroutine.launch(on: schedulers[0]) {
                    got.value = Result { try ch.receive() }
                }
                #expect(await Kit.eventually { r.status == .suspended })
                // When one thread trySends while another cancels the receiver.
                let sent = Kit.Box<Bool?>(nil)
                try await Kit.onPlainThreads(2) { t in
                    if t == 0 { sent.value = try? ch.trySend(round) } else { r.cancel() }
                }
                try await r.join()
                guard let got = got.value else { Issue.record("receiver did not finish"); return }
                let leftover = CK.drain(ch).values
                switch (sent.value, got) {
                case (true, .success(let v)):
                    // Delivered: the receiver got exactly this value, nothing left over.
                    #expect(v == round)
                    #expect(leftover.isEmpty)
                    deliveredWins += 1
                case (true, .failure(let e)):
                    // Sent but not to the receiver: only allowed when buffered, and then it is still there.
                    #expect(e is CancellationError)
                    #expect(capacity > 0 && leftover == [round], "round \(round): value reported sent was lost")
                    cancelWins += 1
                case (false, .failure(let e)):
                    #expect(e is CancellationError)
                    #expect(capacity == 0 && leftover.isEmpty)
                    cancelWins += 1
                case (false, .success(let v)):
                    Issue.record("round \(round): trySend reported false but the receiver got \(v)")
                case (nil, _):
                    Issue.record("trySend threw")
                }
            }
            #expect(deliveredWins + cancelWins == 200)
        }
    }

    // MARK: select

    @Test("cancelling a coroutine blocked in select throws CancellationError and removes it from every queue")
    func cancelDuringSelect() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let a = Channel<Int>(), b = Channel<Int>(), c = Channel<Int>()
            let timersBefore = CK.armedTimers()
            let x = Coroutine.launch {
                log.append("select " + CK.result {
                    let r: String = try select { s in
                        s.receive(from: a) { "a \(String(describing: $0))" }
                        s.receive(from: b) { "b \(String(describing: $0))" }
                        s.send(5, to: c) { "sent c" }
                        s.timeout(after: hangBound) { "timeout" }
                    }
                    return r
                })
            }
            try CK.waitUntilSuspended(x)
            x.cancel()
            try x.join()
            // No waiter is left on any of the channels, and the select's timer is released.
            log.append("a \(try a.trySend(1)) b \(try b.trySend(1)) c \(String(describing: try c.tryReceive()))")
            log.append("timers \(CK.armedTimers() - timersBefore)")
            return log.all
        }
        #expect(log == ["select cancelled", "a false b false c nil", "timers 0"])
    }

    @Test("a select a peer already completed returns that case; the cancellation hits the next suspending call")
    func selectCompletedBeforeCancel() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let a = Channel<Int>(), b = Channel<Int>()
            let x = Coroutine.launch {
                log.append("select " + CK.result {
                    let r: String = try select { s in
                        s.receive(from: a) { "a \($0 ?? -1)" }
                        s.receive(from: b) { "b \($0 ?? -1)" }
                    }
                    return r
                })
                log.append("next " + CK.outcome { try Coroutine.yield() })
            }
            try CK.waitUntilSuspended(x)
            Coroutine.launch {
                try b.send(3)
                x.cancel()
            }
            try x.join()
            log.append("a free \(try !a.trySend(1))")
            return log.all
        }
        #expect(log == ["select b 3", "next cancelled", "a free true"])
    }

    @Test("cancelled receivers among many never swallow values sent later", arguments: TestCapacity.allCases)
    func cancelledReceiversNeverConsume(capacity: TestCapacity) async throws {
        let (got, cancelledGot) = try await Kit.run { () -> ([Int], Int) in
            let ch = Channel<Int>(capacity: capacity.capacity)
            let got = Kit.Log<Int>()
            let cancelledGot = Kit.Counter()
            // Twenty receivers; the even ones will be cancelled.
            let rs = (0..<20).map { i in
                Coroutine.launch {
                    do {
                        let v = try ch.receive()
                        if i.isMultiple(of: 2) { cancelledGot.increment() }
                        got.append(v)
                    } catch {}
                }
            }
            try CK.waitUntilSuspended(rs)
            for (i, r) in rs.enumerated() where i.isMultiple(of: 2) { r.cancel() }
            for (i, r) in rs.enumerated() where i.isMultiple(of: 2) { try r.join() }
            // Ten values: all go to the ten live receivers.
            for v in 0..<10 { try ch.send(v) }
            for r in rs { try r.join() }
            return (got.all, cancelledGot.value)
        }
        #expect(cancelledGot == 0)
        #expect(got == Array(0..<10))
    }
}
