import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// FIFO order, closing, trySend/tryReceive, cancellation and hand-off (<doc:ChannelsAndSelect>)
/// under load across several schedulers. The suite names contain "Stress" so CI also runs them
/// under ThreadSanitizer.
@Suite("Channel Stress")
struct ChannelStressTests {
    @Test("many producers × many consumers on 4 schedulers: every value received exactly once, per-producer order kept",
          arguments: TestCapacity.allCases)
    func producersConsumers(capacity: TestCapacity) async throws {
        let producers = 8, consumers = 8
        let perProducer = TestEnvironment.heavyTestsEnabled ? 2_000 : 500
        try await CK.withSchedulers(4, "pc") { schedulers in
            let perConsumer = try await Kit.run { () -> [[Int]] in
                let ch = Channel<Int>(capacity: capacity.capacity)
                let cs = (0..<consumers).map { i in
                    Coroutine.async(on: schedulers[i % 4]) { () -> [Int] in
                        var got: [Int] = []
                        for x in ch { got.append(x) }
                        return got
                    }
                }
                let ps = (0..<producers).map { p in
                    Coroutine.launch(on: schedulers[(p + 1) % 4]) {
                        for i in 0..<perProducer { try ch.send(p * 1_000_000 + i) }
                    }
                }
                for p in ps { try p.join() }
                let failed = ps.filter { $0.error != nil }.count
                ch.close()
                let out = try cs.map { try $0.await() }
                return failed == 0 ? out : []
            }
            let all = perConsumer.flatMap { $0 }
            let expected = (0..<producers).flatMap { p in (0..<perProducer).map { p * 1_000_000 + $0 } }
            #expect(all.count == expected.count)
            #expect(all.sorted() == expected.sorted())
            // FIFO: each consumer sees one producer's values in send order.
            for got in perConsumer {
                var last: [Int: Int] = [:]
                for v in got {
                    let p = v / 1_000_000
                    #expect((last[p] ?? -1) < v, "out of order for producer \(p)")
                    last[p] = v
                }
            }
        }
    }

    /// Only detects a hang: alone, a chain takes about a second, but in the full parallel suite on
    /// 2 CPUs both chains took 51–67 s (Intel Xeon), so a 60 s bound failed runs that were merely
    /// slow. 600 s is about ten times the slowest passing run.
    static let daisyChainHangLimit = Duration.seconds(600)

    @Test("a daisy chain of 10,000 coroutines passes a value along, each adding 1")
    func daisyChain() async throws {
        let n = 10_000
        let result = try await Kit.run(limit: Self.daisyChainHangLimit) { () -> Int in
            let leftmost = Channel<Int>()
            var right = leftmost
            var left = leftmost
            for _ in 0..<n {
                right = Channel<Int>()
                let (l, r) = (left, right)
                Coroutine.launch(stackSize: 64 * 1024) { try l.send(1 + r.receive()) }
                left = right
            }
            let last = right
            Coroutine.launch { try last.send(1) }
            return try leftmost.receive()
        }
        #expect(result == n + 1)
    }

    @Test("a daisy chain spread over 4 schedulers passes a value along")
    func daisyChainAcrossSchedulers() async throws {
        let n = TestEnvironment.heavyTestsEnabled ? 10_000 : 2_000
        try await CK.withSchedulers(4, "chain") { schedulers in
            let result = try await Kit.run(limit: Self.daisyChainHangLimit) { () -> Int in
                let leftmost = Channel<Int>()
                var right = leftmost
                var left = leftmost
                for i in 0..<n {
                    right = Channel<Int>()
                    let (l, r) = (left, right)
                    Coroutine.launch(on: schedulers[i % 4], stackSize: 64 * 1024) { try l.send(1 + r.receive()) }
                    left = right
                }
                let last = right
                Coroutine.launch(on: schedulers[0]) { try last.send(1) }
                return try leftmost.receive()
            }
            #expect(result == n + 1)
        }
    }

    @Test("trySend never loses a value it reported sent, racing receivers that time out in select",
          arguments: [0, 4])
    func trySendNeverLoses(capacity: Int) async throws {
        let successesPerThread = TestEnvironment.heavyTestsEnabled ? 2_000 : 500
        try await CK.withSchedulers(4, "trysend") { schedulers in
            let ch = Channel<Int>(capacity: capacity)
            // Receivers on four threads, each receiving through a select with a tiny timeout
            // (so timeouts race with trySend's hand-off), until the channel is closed.
            let receivers = (0..<4).map { i in
                Coroutine.async(on: schedulers[i]) { () -> [Int] in
                    var got: [Int] = []
                    while true {
                        let v: Int?? = try select { s in
                            s.receive(from: ch) { .some($0) }
                            s.timeout(after: .microseconds(50)) { .none }
                        }
                        switch v {
                        case .some(.some(let x)): got.append(x)
                        case .some(.none): return got      // closed and drained
                        case .none: continue                // timed out
                        }
                    }
                }
            }
            // Producers on plain threads: each value tried once, new values until enough were
            // reported sent; record which were.
            let sent = Kit.Log<Int>()
            try await Kit.onPlainThreads(4) { t in
                var mine: [Int] = []
                var i = 0
                while mine.count < successesPerThread && i < 10_000_000 {
                    let v = t * 10_000_000 + i
                    i += 1
                    if (try? ch.trySend(v)) == true { mine.append(v) } else { sched_yield() }
                }
                for v in mine { sent.append(v) }
            }
            ch.close()
            var received: [Int] = []
            for r in receivers { received += try await r.value }
            let reportedSent = sent.all
            // Every value reported sent was received exactly once; nothing else was received.
            #expect(received.count == reportedSent.count)
            #expect(received.sorted() == reportedSent.sorted())
            #expect(reportedSent.count == 4 * successesPerThread)
        }
    }

    @Test("close and cancel racing sends and receives on 4 schedulers: nothing lost, nothing duplicated, nothing hangs",
          arguments: [0, 3])
    func closeAndCancelRacingSends(capacity: Int) async throws {
        let rounds = TestEnvironment.heavyTestsEnabled ? 20 : 6
        try await CK.withSchedulers(4, "close-cancel") { schedulers in
            for round in 0..<rounds {
                let ch = Channel<Int>(capacity: capacity)
                let delivered = Kit.Log<Int>()      // sends that returned normally
                let failed = Kit.Log<Int>()         // sends that threw (closed or cancelled)
                let received = Kit.Log<Int>()
                let senders = (0..<8).map { s in
                    Coroutine.launch(on: schedulers[s % 4]) {
                        for i in 0..<200 {
                            let v = s * 100_000 + i
                            do {
                                try ch.send(v)
                                delivered.append(v)
                            } catch {
                                failed.append(v)
                                return
                            }
                        }
                    }
                }
                let receivers = (0..<6).map { r in
                    Coroutine.launch(on: schedulers[(r + 2) % 4]) {
                        while true {
                            guard let v = try? ch.receive() else { return }
                            received.append(v)
                        }
                    }
                }
                // A disrupter cancels some senders and receivers, then closes the channel.
                try await Kit.run {
                    var rng = SystemRandomNumberGenerator()
                    try Coroutine.delay(.microseconds(Int.random(in: 0...500, using: &rng)))
                    senders[round % 8].cancel()
                    receivers[round % 6].cancel()
                    try Coroutine.delay(.microseconds(Int.random(in: 0...500, using: &rng)))
                    senders[(round + 3) % 8].cancel()
                    receivers[(round + 1) % 6].cancel()
                    try Coroutine.delay(.microseconds(Int.random(in: 0...1_000, using: &rng)))
                    ch.close()
                }
                for s in senders { try await s.join() }
                for r in receivers { try await r.join() }
                // Buffered values left after every receiver ended.
                let leftover = CK.drain(ch)
                let got = received.all + leftover.values
                #expect(leftover.end == "closed")
                // Nothing duplicated.
                #expect(Set(got).count == got.count, "round \(round): duplicates")
                // Nothing lost: every send that returned normally was received or is still buffered,
                // and no value whose send threw was ever delivered.
                #expect(Set(got) == Set(delivered.all), "round \(round): delivered \(delivered.all.count), got \(got.count)")
                #expect(Set(got).isDisjoint(with: failed.all), "round \(round): a failed send was delivered")
            }
        }
    }

    @Test("select-based producers and consumers across 4 schedulers deliver every value once")
    func selectStress() async throws {
        let perProducer = TestEnvironment.heavyTestsEnabled ? 2_000 : 500
        try await CK.withSchedulers(4, "select-stress") { schedulers in
            let a = Channel<Int>(), b = Channel<Int>(capacity: 2)
            let consumers = (0..<4).map { i in
                Coroutine.async(on: schedulers[i]) { () -> [Int] in
                    var got: [Int] = []
                    var aOpen = true, bOpen = true
                    while aOpen || bOpen {
                        let (which, v): (Int, Int?) = try select { s in
                            if aOpen { s.receive(from: a) { (0, $0) } }
                            if bOpen { s.receive(from: b) { (1, $0) } }
                        }
                        if v == nil { if which == 0 { aOpen = false } else { bOpen = false } }
                        if let v { got.append(v) }
                    }
                    return got
                }
            }
            let producers = (0..<4).map { p in
                Coroutine.launch(on: schedulers[(p + 1) % 4]) {
                    for i in 0..<perProducer {
                        let v = p * 1_000_000 + i
                        let _: Int = try select { s in
                            s.send(v, to: a) { 0 }
                            s.send(v, to: b) { 1 }
                        }
                    }
                }
            }
            for p in producers { try await p.join() }
            #expect(producers.allSatisfy { $0.error == nil })
            a.close()
            b.close()
            var got: [Int] = []
            for c in consumers { got += try await c.value }
            let expected = (0..<4).flatMap { p in (0..<perProducer).map { p * 1_000_000 + $0 } }
            #expect(got.sorted() == expected)
        }
    }

    @Test("mixed blocking receives, tryReceives and cancellations never duplicate a value")
    func mixedReceivers() async throws {
        let total = TestEnvironment.heavyTestsEnabled ? 20_000 : 5_000
        try await CK.withSchedulers(4, "mixed") { schedulers in
            let ch = Channel<Int>(capacity: 8)
            let got = Kit.Log<Int>()
            let blocking = (0..<4).map { i in
                Coroutine.launch(on: schedulers[i]) {
                    while let v = try? ch.receive() { got.append(v) }
                }
            }
            let producer = Coroutine.launch(on: schedulers[0]) {
                for v in 0..<total { try ch.send(v) }
                ch.close()
            }
            // Plain threads poll with tryReceive meanwhile; one blocking receiver gets cancelled.
            try await Kit.onPlainThreads(2) { t in
                var n = 0
                while true {
                    do {
                        if let v = try ch.tryReceive() { got.append(v) } else { usleep(10) }
                    } catch { return }
                    n += 1
                    if t == 0 && n == 100 { blocking[1].cancel() }
                }
            }
            try await producer.join()
            for b in blocking { try await b.join() }
            #expect(producer.error == nil)
            #expect(got.all.sorted() == Array(0..<total))
        }
    }
}
