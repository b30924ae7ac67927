import Foundation
import Synchronization
import CoroutinesTestSupport
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

// MARK: - Capacity and FIFO

/// Basic channel semantics, as the ChannelsAndSelect article states them (<doc:ChannelsAndSelect>).
@Suite("Channel basics")
struct ChannelBasicTests {
    @Test("one sender's values arrive in FIFO order at every capacity from 0 to 20", arguments: 0...20)
    func fifoAtEveryCapacity(capacity: Int) async throws {
        try await Kit.withScheduler("fifo-sender-\(capacity)") { other in
            let received = try await Kit.run { () -> [Int] in
                // Given a channel of this capacity and a sender on another thread.
                let ch = Channel<Int>(capacity: capacity)
                Coroutine.launch(on: other) {
                    for i in 0..<200 { try ch.send(i) }
                    ch.close()
                }
                // When a receiver takes everything.
                var got: [Int] = []
                for x in ch { got.append(x) }
                return got
            }
            // Then it arrived in order, each once.
            #expect(received == Array(0..<200))
        }
    }

    @Test("count and capacity report the buffer and its size")
    func countAndCapacity() throws {
        let rendezvous = Channel<Int>()
        #expect(rendezvous.capacity == 0)
        #expect(rendezvous.count == 0)

        let literal = Channel<Int>(capacity: 5)
        #expect(literal.capacity == 5)
        #expect(literal.count == 0)
        #expect(try literal.trySend(1))
        #expect(try literal.trySend(2))
        #expect(try literal.trySend(3))
        #expect(literal.count == 3)
        #expect(try literal.tryReceive() == 1)
        #expect(literal.count == 2)

        let runtime = Channel<Int>(capacity: Kit.opaque(4))
        #expect(runtime.capacity == 4)

        let bounded = Channel<Int>(capacity: .bounded(7))
        #expect(bounded.capacity == 7)

        let unbounded = Channel<Int>(capacity: .unbounded)
        #expect(unbounded.capacity == Int.max)
        for i in 0..<1000 { #expect(try unbounded.trySend(i)) }
        #expect(unbounded.count == 1000)

        // Capacity values compare and hash.
        #expect(Channel<Int>.Capacity.bounded(3) == 3)
        #expect(Channel<Int>.Capacity.bounded(3) != .unbounded)
        #expect(Set<Channel<Int>.Capacity>([.bounded(1), 1, .unbounded]).count == 2)
    }

    @Test("count stays 0 on a rendezvous channel with blocked senders")
    func rendezvousCountWithBlockedSender() async throws {
        let seen = try await Kit.run { () -> [Int] in
            let ch = Channel<Int>()
            let senders = (0..<3).map { i in Coroutine.launch { try ch.send(i) } }
            try CK.waitUntilSuspended(senders)
            let count = ch.count
            let values = try (0..<3).map { _ in try ch.receive() }
            return [count] + values
        }
        #expect(seen == [0, 0, 1, 2])
    }

    // MARK: Rendezvous

    @Test("rendezvous, sender first: the send completes only when a receiver takes the value")
    func rendezvousSenderFirst() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch = Channel<String>()
            // Given a sender blocked on a rendezvous channel.
            let sender = Coroutine.launch {
                try ch.send("hello")
                log.append("send returned")
            }
            try CK.waitUntilSuspended(sender)
            try Coroutine.delay(.milliseconds(5))
            log.append("sender still blocked: \(sender.status == .suspended && !sender.isFinished)")
            // When a receiver takes the value.
            log.append("received \(try ch.receive())")
            // Then the send returns.
            try sender.join()
            return log.all
        }
        #expect(log == ["sender still blocked: true", "received hello", "send returned"])
    }

    @Test("rendezvous, receiver first: the send hands the value over and the receiver runs after the sender suspends")
    func rendezvousReceiverFirst() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch = Channel<String>()
            // Given a receiver blocked on a rendezvous channel.
            let receiver = Coroutine.launch {
                log.append("received \(try ch.receive())")
            }
            try CK.waitUntilSuspended(receiver)
            // When a value is sent.
            try ch.send("hello")
            log.append("send returned")
            // Then the receiver got it, but runs only once the sender suspends (the wake-up
            // order of <doc:CoroutineLifecycle>).
            try receiver.join()
            return log.all
        }
        #expect(log == ["send returned", "received hello"])
    }

    @Test("rendezvous across threads in both orders")
    func rendezvousAcrossThreads() async throws {
        try await Kit.withScheduler("rendezvous-other") { other in
            let values = try await Kit.run { () -> [Int] in
                let ch = Channel<Int>()
                var out: [Int] = []
                // Receiver on the other thread blocks first.
                let r = Coroutine.async(on: other) { try ch.receive() }
                try Coroutine.delay(.milliseconds(2))
                try ch.send(1)
                out.append(try r.await())
                // Sender on the other thread blocks first.
                let s = Coroutine.launch(on: other) { try ch.send(2) }
                try CK.waitUntilSuspended(s)
                out.append(try ch.receive())
                try s.join()
                out.append(s.error == nil ? 0 : -1)
                return out
            }
            #expect(values == [1, 2, 0])
        }
    }

    @Test("a buffered channel blocks its sender only when full")
    func bufferedBlocksWhenFull() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch = Channel<Int>(capacity: 3)
            let sender = Coroutine.launch {
                for i in 0..<4 { try ch.send(i); log.append("sent \(i)") }
            }
            try CK.waitUntilSuspended(sender)
            log.append("count \(ch.count)")
            log.append("got \(try ch.receive())")
            try sender.join()
            log.append("count \(ch.count)")
            return log.all
        }
        #expect(log == ["sent 0", "sent 1", "sent 2", "count 3", "got 0", "sent 3", "count 3"])
    }

    @Test("an unbounded channel never blocks its sender and keeps FIFO order")
    func unbounded() async throws {
        let (values, count, blocked) = try await Kit.run { () -> ([Int], Int, Int) in
            let ch = Channel<Int>(capacity: .unbounded)
            let peerRan = Kit.Counter()
            // A peer that would run if the sender ever suspended.
            Coroutine.launch { peerRan.increment() }
            for i in 0..<10_000 { try ch.send(i) }
            let blocked = peerRan.value
            let count = ch.count
            var values: [Int] = []
            for _ in 0..<10_000 { values.append(try ch.receive()) }
            return (values, count, blocked)
        }
        #expect(blocked == 0)
        #expect(count == 10_000)
        #expect(values == Array(0..<10_000))
    }

    @Test("blocked receivers are served in FIFO order", arguments: TestCapacity.allCases)
    func blockedReceiversFIFO(capacity: TestCapacity) async throws {
        let log = try await Kit.run { () -> [String] in
            let ch = Channel<Int>(capacity: capacity.capacity)
            let log = Kit.Log<String>()
            let rs = (0..<10).map { i in Coroutine.launch { log.append("r\(i) \(try ch.receive())") } }
            try CK.waitUntilSuspended(rs)
            for v in 0..<10 { try ch.send(100 + v) }
            for r in rs { try r.join() }
            return log.all.sorted()
        }
        #expect(log == (0..<10).map { "r\($0) \(100 + $0)" }.sorted())
    }

    @Test("blocked senders are served in FIFO order", arguments: TestCapacity.bounded)
    func blockedSendersFIFO(capacity: TestCapacity) async throws {
        let values = try await Kit.run { () -> [Int] in
            let ch = Channel<Int>(capacity: capacity.capacity)
            for i in 0..<capacity.room { try ch.send(i) }
            let ss = (0..<10).map { i in Coroutine.launch { try ch.send(100 + i) } }
            try CK.waitUntilSuspended(ss)
            let values = try (0..<(capacity.room + 10)).map { _ in try ch.receive() }
            for s in ss { try s.join() }
            return values
        }
        #expect(values == Array(0..<capacity.room) + Array(100..<110))
    }

    @Test("withTimeout ends a blocked receive or send with timedOut and withdraws it", arguments: TestCapacity.bounded)
    func withTimeoutOnChannel(capacity: TestCapacity) async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let ch = Channel<Int>(capacity: capacity.capacity)
            log.append("receive " + CK.outcome { try Coroutine.withTimeout(.milliseconds(10)) { _ = try ch.receive() } })
            log.append(capacity == .rendezvous ? "trySend \(try ch.trySend(1))" : "count \(ch.count)")
            for i in 0..<capacity.room { _ = try ch.trySend(i) }
            log.append("send " + CK.outcome { try Coroutine.withTimeout(.milliseconds(10)) { try ch.send(99) } })
            log.append("drained \(CK.drain(ch).values)")
            log.append("timers \(CK.armedTimers())")
            return log
        }
        let middle = capacity == .rendezvous ? "trySend false" : "count 0"
        #expect(log == ["receive timedOut", middle, "send timedOut", "drained \(Array(0..<capacity.room))", "timers 0"])
    }

    @Test("Coroutine.dumpAll() names a coroutine blocked on a channel as waiting in a channel")
    func dumpAllShowsChannelWait() async throws {
        let dump = try await Kit.run { () -> String in
            let ch = Channel<Int>()
            let c = Coroutine.launch(name: "dump-channel-receiver") { _ = try ch.receive() }
            try CK.waitUntilSuspended(c)
            let dump = Coroutine.dumpAll()
            ch.close()
            return dump
        }
        let line = dump.split(separator: "\n").first { $0.contains("dump-channel-receiver") }
        #expect(line?.contains("channel") == true, "dump: \(dump)")
    }

    // MARK: - trySend / tryReceive

    @Test("trySend and tryReceive on a buffered channel")
    func tryOnBuffered() throws {
        let ch = Channel<Int>(capacity: 2)
        #expect(try ch.tryReceive() == nil)
        #expect(try ch.trySend(1))
        #expect(try ch.trySend(2))
        #expect(try !ch.trySend(3))    // full: false, and the value is not buffered
        #expect(ch.count == 2)
        #expect(try ch.tryReceive() == 1)
        #expect(try ch.tryReceive() == 2)
        #expect(try ch.tryReceive() == nil)
    }

    @Test("trySend on a rendezvous channel returns false without a waiting receiver, tryReceive returns nil without a waiting sender")
    func tryOnRendezvousAlone() throws {
        let ch = Channel<Int>()
        #expect(try !ch.trySend(1))
        #expect(try ch.tryReceive() == nil)
        #expect(ch.count == 0)
    }

    @Test("trySend on a rendezvous channel hands the value to a waiting receiver")
    func trySendToWaitingReceiver() async throws {
        let (sent, got) = try await Kit.run { () -> (Bool, Int) in
            let ch = Channel<Int>()
            let r = Coroutine.async { try ch.receive() }
            try Coroutine.yield()   // r blocks in receive
            let sent = try ch.trySend(42)
            return (sent, try r.await())
        }
        #expect(sent)
        #expect(got == 42)
    }

    @Test("tryReceive on a rendezvous channel takes a waiting sender's value, and that send returns normally")
    func tryReceiveFromWaitingSender() async throws {
        let (got, senderError, nextTry) = try await Kit.run { () -> (Int?, String, Int?) in
            let ch = Channel<Int>()
            let s = Coroutine.launch { try ch.send(7) }
            try CK.waitUntilSuspended(s)
            let got = try ch.tryReceive()
            try s.join()
            return (got, String(describing: s.error), try ch.tryReceive())
        }
        #expect(got == 7)
        #expect(senderError == "nil")
        #expect(nextTry == nil)
    }

    @Test("tryReceive on a full buffered channel with a blocked sender moves that sender's value into the buffer")
    func tryReceiveRefillsFromBlockedSender() async throws {
        let (values, senderDone) = try await Kit.run { () -> ([Int], Bool) in
            let ch = Channel<Int>(capacity: 2)
            try ch.send(1)
            try ch.send(2)
            let s = Coroutine.launch { try ch.send(3) }
            try CK.waitUntilSuspended(s)
            var values: [Int] = []
            values.append(try ch.tryReceive() ?? -1)
            try s.join()
            values.append(try ch.tryReceive() ?? -1)
            values.append(try ch.tryReceive() ?? -1)
            values.append(try ch.tryReceive() ?? -1)
            return (values, s.isFinished && s.error == nil)
        }
        #expect(values == [1, 2, 3, -1])
        #expect(senderDone)
    }

    @Test("try…, close, isClosed and count work from plain threads; every value sent is received once")
    func tryFromPlainThreads() async throws {
        let ch = Channel<Int>(capacity: .unbounded)
        try await Kit.onPlainThreads(4) { t in
            for i in 0..<1_000 { _ = try? ch.trySend(t * 1_000 + i) }
        }
        #expect(ch.count == 4_000)
        let taken = Kit.Log<Int>()
        try await Kit.onPlainThreads(4) { _ in
            while let v = try? ch.tryReceive() { taken.append(v) }
        }
        #expect(taken.all.sorted() == Array(0..<4_000))
        let closes = Kit.Counter()
        try await Kit.onPlainThreads(4) { _ in
            if ch.close() { closes.increment() }
        }
        #expect(closes.value == 1)
        #expect(ch.isClosed)
        #expect(throws: ChannelError.closed) { try ch.tryReceive() }
        #expect(throws: ChannelError.closed) { try ch.trySend(1) }
    }

    @Test("trySend from a plain thread reaches a coroutine blocked in receive")
    func trySendFromPlainThreadToCoroutine() async throws {
        try await Kit.withScheduler("try-plain") { s in
            let ch = Channel<Int>()
            let r = Coroutine.async(on: s) { try ch.receive() }
            // Retry until the receiver is waiting; trySend never drops a value it reports sent.
            try await Kit.onPlainThread {
                while try !ch.trySend(99) { usleep(100) }
            }
            #expect(try await r.value == 99)
        }
    }

    // MARK: - close

    @Test("after close, buffered values drain, then receive and tryReceive throw closed at once, forever")
    func closeDrainsThenThrows() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let ch = Channel<Int>(capacity: 5)
            for i in 1...3 { try ch.send(i) }
            log.append("close \(ch.close())")
            log.append("isClosed \(ch.isClosed)")
            log.append("count \(ch.count)")
            for _ in 0..<3 { log.append(CK.result { try ch.receive() }) }
            // A peer that would run if receive suspended.
            let peerRan = Kit.Counter()
            Coroutine.launch { peerRan.increment() }
            for _ in 0..<3 { log.append(CK.result { try ch.receive() }) }
            log.append(CK.result { try ch.tryReceive() })
            log.append("peer ran \(peerRan.value)")
            log.append(CK.outcome { try ch.send(9) })
            log.append(CK.result { try ch.trySend(9) })
            log.append("close again \(ch.close())")
            log.append("close(throwing:) again \(ch.close(throwing: CK.Failure(code: 1)))")
            log.append(CK.result { try ch.receive() })
            return log
        }
        #expect(log == ["close true", "isClosed true", "count 3", "1", "2", "3",
                        "closed", "closed", "closed", "closed", "peer ran 0",
                        "closed", "closed", "close again false", "close(throwing:) again false", "closed"])
    }

    @Test("close(throwing:) hands receivers the error after draining; senders get ChannelError.closed")
    func closeThrowing() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let ch = Channel<Int>(capacity: 5)
            try ch.send(1)
            try ch.send(2)
            log.append("close \(ch.close(throwing: CK.Failure(code: 7)))")
            log.append(CK.result { try ch.receive() })
            log.append(CK.result { try ch.tryReceive() })
            log.append(CK.result { try ch.receive() })
            log.append(CK.result { try ch.receive() })
            log.append(CK.result { try ch.tryReceive() })
            log.append(CK.outcome { try ch.send(3) })
            log.append(CK.result { try ch.trySend(3) })
            log.append("close \(ch.close())")
            log.append(CK.result { try ch.receive() })
            return log
        }
        #expect(log == ["close true", "1", "Optional(2)", "failure 7", "failure 7", "failure 7",
                        "closed", "closed", "close false", "failure 7"])
    }

    @Test("close(throwing:) wakes blocked receivers with the error")
    func closeThrowingWakesReceivers() async throws {
        let outcomes = try await Kit.run { () -> [String] in
            let ch = Channel<Int>()
            let log = Kit.Log<String>()
            let rs = (0..<3).map { _ in Coroutine.launch { log.append(CK.result { try ch.receive() }) } }
            try CK.waitUntilSuspended(rs)
            ch.close(throwing: CK.Failure(code: 3))
            for r in rs { try r.join() }
            return log.all
        }
        #expect(outcomes == ["failure 3", "failure 3", "failure 3"])
    }

    @Test("for-in over a channel closed with an error ends after draining")
    func forInEndsOnCloseThrowing() async throws {
        let values = try await Kit.run { () -> [Int] in
            let ch = Channel<Int>(capacity: 3)
            try ch.send(1)
            try ch.send(2)
            ch.close(throwing: CK.Failure(code: 1))
            var values: [Int] = []
            for x in ch { values.append(x) }
            return values
        }
        #expect(values == [1, 2])
    }

    @Test("close wakes all 100 blocked receivers, each with ChannelError.closed", arguments: TestCapacity.allCases)
    func closeWakesAllReceivers(capacity: TestCapacity) async throws {
        try await Kit.withScheduler("close-wakes") { other in
            let outcomes = try await Kit.run { () -> [String] in
                let ch = Channel<Int>(capacity: capacity.capacity)
                let log = Kit.Log<String>()
                // Given 100 receivers blocked on an empty channel, half of them on another thread.
                let rs = (0..<100).map { i in
                    Coroutine.launch(on: i.isMultiple(of: 2) ? nil : other) {
                        log.append(CK.result { try ch.receive() })
                    }
                }
                try CK.waitUntilSuspended(rs)
                // When the channel is closed (from a plain thread).
                let closed = Promise<Bool>()
                Thread.detachNewThread { closed.fulfill(ch.close()) }
                let first = try closed.await()
                // Then every receiver wakes with ChannelError.closed.
                for r in rs { try r.join() }
                return ["close \(first)"] + log.all
            }
            #expect(outcomes == ["close true"] + Array(repeating: "closed", count: 100))
        }
    }

    @Test("senders blocked at close throw ChannelError.closed and their values are never received",
          arguments: TestCapacity.bounded)
    func closeFailsBlockedSenders(capacity: TestCapacity) async throws {
        let (senders, drained) = try await Kit.run { () -> ([String], [String]) in
            let ch = Channel<Int>(capacity: capacity.capacity)
            for i in 0..<capacity.room { try ch.send(i) }
            let log = Kit.Log<String>()
            // Given five senders blocked on a full channel.
            let ss = (100..<105).map { v in Coroutine.launch { log.append("\(v) " + CK.outcome { try ch.send(v) }) } }
            try CK.waitUntilSuspended(ss)
            // When it is closed.
            ch.close()
            for s in ss { try s.join() }
            // Then they all threw closed, and only the values buffered before close are received.
            var drained: [String] = []
            while true {
                let r = CK.result { try ch.receive() }
                drained.append(r)
                if r == "closed" { break }
            }
            return (log.all.sorted(), drained)
        }
        #expect(senders == (100..<105).map { "\($0) closed" })
        #expect(drained == (0..<capacity.room).map { "\($0)" } + ["closed"])
    }

    @Test("close is idempotent: exactly one of many concurrent closes returns true")
    func closeIdempotentConcurrently() async throws {
        for _ in 0..<20 {
            let ch = Channel<Int>(capacity: 1)
            let winners = Kit.Log<Int>()
            try await Kit.onPlainThreads(6) { t in
                let won = t.isMultiple(of: 2) ? ch.close() : ch.close(throwing: CK.Failure(code: t))
                if won { winners.append(t) }
            }
            try #require(winners.all.count == 1)
            let winner = winners.all[0]
            // The error receivers see is the winner's.
            let expected = winner.isMultiple(of: 2) ? "closed" : "failure \(winner)"
            #expect(CK.result { try ch.tryReceive() } == expected)
        }
    }

    // MARK: - Iteration

    @Test("a worker pool over `for x in channel` processes every value once and ends on close")
    func workerPool() async throws {
        try await CK.withSchedulers(3, "workers") { schedulers in
            let (perWorker, ended) = try await Kit.run { () -> ([[Int]], Int) in
                let jobs = Channel<Int>(capacity: 4)
                let ended = Kit.Counter()
                // Given six workers on four threads, each looping over the channel.
                let workers = (0..<6).map { w in
                    Coroutine.async(on: w < 3 ? schedulers[w] : nil) { () -> [Int] in
                        var mine: [Int] = []
                        for job in jobs { mine.append(job) }
                        ended.increment()
                        return mine
                    }
                }
                // When 1,000 jobs are sent and the channel is closed.
                for j in 1...1_000 { try jobs.send(j) }
                jobs.close()
                // Then every worker's loop ends.
                let perWorker = try workers.map { try $0.await() }
                return (perWorker, ended.value)
            }
            #expect(ended == 6)
            // And every job was processed exactly once, each worker seeing them in send order.
            #expect(perWorker.flatMap { $0 }.sorted() == Array(1...1_000))
            for w in perWorker { #expect(w == w.sorted()) }
        }
    }

    @Test("the iterator returns nil when the iterating coroutine is cancelled; the next suspending call throws")
    func iteratorEndsOnCancel() async throws {
        let (log, closed) = try await Kit.run { () -> ([String], Bool) in
            let log = Kit.Log<String>()
            let ch = Channel<Int>()
            let c = Coroutine.launch {
                for x in ch { log.append("got \(x)") }
                log.append("loop ended")
                log.append("next call " + CK.outcome { try Coroutine.yield() })
            }
            try ch.send(1)
            try ch.send(2)
            try CK.waitUntilSuspended(c)
            c.cancel()
            try c.join()
            return (log.all, ch.isClosed)
        }
        #expect(log == ["got 1", "got 2", "loop ended", "next call cancelled"])
        #expect(!closed)
    }

    @Test("a cancelled coroutine's iterator returns nil at once, even with buffered values, and consumes none")
    func iteratorInCancelledCoroutine() async throws {
        let (got, count) = try await Kit.run { () -> ([Int], Int) in
            let ch = Channel<Int>(capacity: 3)
            try ch.send(1)
            try ch.send(2)
            let got = Kit.Log<Int>()
            let c = Coroutine.launch {
                Coroutine.current!.cancel()
                for x in ch { got.append(x) }
            }
            try c.join()
            return (got.all, ch.count)
        }
        #expect(got.isEmpty)
        #expect(count == 2)
    }

    /// A regression test: it failed before its fix.
    @Test("withTimeout around `for x in channel` throws timedOut although the loop swallowed it")
    func withTimeoutAroundIterator() async throws {
        let outcome = try await CoroutineTestKit.run { () -> String in
            let channel = Channel<Int>()                  // never closed
            do {
                return try Coroutine.withTimeout(.milliseconds(20)) { () -> String in
                    var n = 0
                    for _ in channel { n += 1 }
                    return "loop ended normally after \(n) values"
                }
            } catch CoroutineError.timedOut {
                return "timedOut"
            }
        }
        #expect(outcome == "timedOut")
    }

    // MARK: - Misuse (<doc:BadInputAndMisuse>)

    @Test("send, receive and select outside a coroutine throw notInCoroutine, never block, consume nothing")
    func suspendingCallsOutsideCoroutine() async throws {
        let outcomes = try await Kit.onPlainThread { () -> [String] in
            let empty = Channel<Int>()
            let buffered = Channel<Int>(capacity: 2)
            _ = try buffered.trySend(5)
            var out: [String] = []
            out.append(CK.outcome { try empty.send(1) })
            out.append(CK.outcome { _ = try empty.receive() })
            out.append(CK.outcome { try buffered.send(1) })
            out.append(CK.outcome { _ = try buffered.receive() })
            out.append(CK.outcome {
                let _: Int = try select { s in s.receive(from: buffered) { $0 ?? -1 } }
            })
            out.append("count \(buffered.count)")
            return out
        }
        #expect(outcomes == ["notInCoroutine", "notInCoroutine", "notInCoroutine", "notInCoroutine",
                             "notInCoroutine", "count 1"])
    }

    @Test("send and receive on a scheduler thread outside any coroutine throw notInCoroutine")
    func suspendingCallsOnSchedulerLoop() async throws {
        try await Kit.withScheduler("outside-on-loop") { s in
            let outcomes = try await Kit.onSchedulerLoop(s) { () -> [String] in
                let ch = Channel<Int>(capacity: 1)
                return [CK.outcome { try ch.send(1) }, CK.outcome { _ = try ch.receive() }]
            }
            #expect(outcomes == ["notInCoroutine", "notInCoroutine"])
        }
    }

    @Test("send and trySend after close throw ChannelError.closed, also outside coroutines")
    func sendAfterClose() throws {
        let ch = Channel<Int>(capacity: 3)
        ch.close()
        #expect(throws: ChannelError.closed) { try ch.trySend(1) }
        #expect(ch.count == 0)
    }

    // MARK: - Async bridges (<doc:CoroutinesAndSwiftConcurrency>)

    @Test("async send and receive from a Task pair with coroutines")
    func asyncOverloads() async throws {
        try await Kit.withScheduler("async-overloads") { s in
            let ch = Channel<Int>()
            // A coroutine receives what a task sends.
            let received = Coroutine.async(on: s) { () -> [Int] in try (0..<3).map { _ in try ch.receive() } }
            for i in 0..<3 { try await ch.send(i) }
            #expect(try await received.value == [0, 1, 2])
            // A task receives what a coroutine sends.
            Coroutine.launch(on: s) { for i in 10..<13 { try ch.send(i) } }
            var got: [Int] = []
            for _ in 0..<3 { got.append(try await ch.receive()) }
            #expect(got == [10, 11, 12])
        }
    }

    @Test("async receive on a closed, drained channel throws closed; async send throws closed")
    func asyncAfterClose() async throws {
        let ch = Channel<Int>(capacity: 1)
        try await ch.send(1)
        ch.close()
        #expect(try await ch.receive() == 1)
        await #expect(throws: ChannelError.closed) { try await ch.receive() }
        await #expect(throws: ChannelError.closed) { try await ch.send(2) }
    }

    @Test("channel.elements iterates from async code until close and drain")
    func elementsSequence() async throws {
        try await Kit.withScheduler("elements") { s in
            let ch = Channel<Int>(capacity: 2)
            Coroutine.launch(on: s) {
                for i in 0..<50 { try ch.send(i) }
                ch.close()
            }
            var got: [Int] = []
            for try await x in ch.elements { got.append(x) }
            #expect(got == Array(0..<50))
        }
    }

    @Test("channel.elements rethrows the error given to close(throwing:) after draining")
    func elementsCloseThrowing() async throws {
        let ch = Channel<Int>(capacity: 2)
        _ = try ch.trySend(1)
        ch.close(throwing: CK.Failure(code: 4))
        var got: [Int] = []
        do {
            for try await x in ch.elements { got.append(x) }
            Issue.record("the sequence ended without throwing")
        } catch {
            #expect(CK.label(error) == "failure 4")
        }
        #expect(got == [1])
    }

    @Test("cancelling a Task blocked in async receive throws CancellationError and removes its waiter")
    func asyncReceiveCancelled() async throws {
        let ch = Channel<Int>()
        let task = Task { try await ch.receive() }
        // Give the task time to block (the outcome below does not depend on whether it did).
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        // No receiver is left waiting: a rendezvous trySend finds nobody.
        #expect(try !ch.trySend(1))
    }

    @Test("cancelling a Task blocked in async send throws CancellationError and its value is never delivered")
    func asyncSendCancelled() async throws {
        let ch = Channel<Int>()
        let task = Task { try await ch.send(5) }
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(try ch.tryReceive() == nil)
    }

    @Test("cancelling a Task iterating channel.elements ends it with CancellationError, consuming nothing more")
    func elementsCancelled() async throws {
        let ch = Channel<Int>(capacity: .unbounded)
        _ = try ch.trySend(1)
        let got = Kit.Log<Int>()
        let task = Task {
            for try await x in ch.elements { got.append(x) }
        }
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        // Whatever the task took before the cancellation plus what is still buffered is
        // exactly what was sent: the cancelled iteration consumed nothing.
        _ = try ch.trySend(2)
        #expect(got.all + CK.drain(ch).values == [1, 2])
    }
}

// MARK: - Child-process tests

/// Traps (preconditions) checked in a child process (``ChildProcess``). Select and sync-primitive
/// child-process tests extend this suite.
@Suite("Channel traps, in a child process", .serialized, .enabled(if: TestEnvironment.exitTestsEnabled))
struct ChannelExitTests {
    @Test("a negative channel capacity is a precondition failure")
    func negativeCapacity() async {
        await ChildProcess.run(.failure, id: "negativeCapacity") {
            _ = Channel<Int>(capacity: CoroutineTestKit.opaque(-1))
        }
        await ChildProcess.run(.failure, id: "negativeCapacity.2") {
            _ = Channel<Int>(capacity: .bounded(CoroutineTestKit.opaque(-3)))
        }
    }

    @Test("the non-throwing iterator traps outside a coroutine, naming the alternatives")
    func iteratorOutsideCoroutine() async {
        let result = await ChildProcess.run(.failure, id: "iteratorOutsideCoroutine") {
            let ch = Channel<Int>(capacity: 1)
            _ = try ch.trySend(1)
            let thread = Thread {
                for _ in ch {}
                exit(0)   // must not get here
            }
            thread.start()
            while true { sleep(1) }
        }
        #if DEBUG
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("receive()") || stderr.contains("elements"), "stderr: \(stderr)")
        #else
        _ = result
        #endif
    }
}

