import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Channel wait queues under races: hand-offs, `close`, cancellation and timeouts meeting across
/// threads (<doc:ChannelsAndSelect>). Every waiter record lives on its coroutine's stack and must be
/// unlinked before its frame ends (ChannelWaiter.swift). Where the channels live across rounds, a
/// record left linked by one round would be popped by a later round from a frame that a new
/// coroutine (reusing the pooled stack) or a new wait has overwritten. Each test checks that every
/// value is delivered exactly once (and in FIFO order where that is defined), and every waiter ends
/// exactly once.
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Channel wait queues under races", .serialized)
struct ChannelWaitQueueStressTests {
    // MARK: Wakes across threads and close

    /// Guards an invariant (channel hand-offs wake claimed coroutines without retaining them).
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

    /// Guards an invariant (`close` chains the claimed records of the waiters it wakes).
    @Test("close races cancellation and timeouts of waiters on other schedulers: each waiter ends exactly once")
    func closeRacesCancelAndTimeout() async throws {
        try await ChannelTestKit.withSchedulers(2, "w") { s in
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

    /// Guards an invariant (`close` chains the claimed records of the waiters it wakes).
    @Test("close from a plain thread wakes a hundred waiters on two schedulers, chained; all see the close")
    func closeWakesManyChained() async throws {
        try await ChannelTestKit.withSchedulers(2, "c") { s in
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
                                    s.timeout(after: hangBound) { () }
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

    /// Guards an invariant (a coroutine that never runs borrows its scheduler and tells its
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

    // MARK: Cancellation racing a hand-off

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("a blocked receive cancelled from another thread as a sender hands it a value: each value delivered once")
    func cancelReceiveVersusSend() async throws {
        try await CK.withSchedulers(2, "wq-cr") { s in
            let ch = Channel<Int>()   // one channel for all rounds
            let got = Kit.Log<Int>()
            let rounds = 300
            for round in 0..<rounds {
                let r = Coroutine.launch(on: s[0]) {
                    do { got.append(try ch.receive()) } catch is CancellationError {}
                }
                try await Kit.run {
                    try CK.waitUntilSuspended(r)
                    let sender = Coroutine.launch(on: s[1]) { try ch.send(round) }
                    jitter(round)
                    r.cancel()
                    try r.join()
                    #expect(r.error == nil)
                    if !got.all.contains(round) {
                        // The cancel won: the value is still with the sender, nobody else took it.
                        #expect(try ch.receive() == round)
                    }
                    try sender.join()
                    #expect(sender.error == nil)
                    #expect(try ch.tryReceive() == nil)
                }
            }
            let all = got.all
            #expect(Set(all).count == all.count, "a value was received twice")
        }
    }

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("a blocked send cancelled from another thread as a receiver takes it: each value delivered once")
    func cancelSendVersusReceive() async throws {
        try await CK.withSchedulers(2, "wq-cs") { s in
            let ch = Channel<Int>()
            let sent = Kit.Log<Int>()
            let received = Kit.Log<Int>()
            for round in 0..<300 {
                let w = Coroutine.launch(on: s[0]) {
                    do { try ch.send(round); sent.append(round) } catch is CancellationError {}
                }
                try await Kit.run {
                    try CK.waitUntilSuspended(w)
                    let receiver = Coroutine.launch(on: s[1]) {
                        // Either w's value, or (the cancel won) the fallback sent below.
                        received.append(try ch.receive())
                    }
                    jitter(round)
                    w.cancel()
                    try w.join()
                    #expect(w.error == nil)
                    if !sent.all.contains(round) { try ch.send(-round - 1) }
                    try receiver.join()
                    #expect(receiver.error == nil)
                    #expect(try ch.tryReceive() == nil)
                }
            }
            let s = sent.all, r = received.all
            #expect(r.count == 300)
            #expect(Set(r).count == r.count, "a value was received twice")
            #expect(Set(s).isSubset(of: Set(r)), "a value reported sent was never received")
            #expect(r.filter { $0 >= 0 }.count == s.count, "a cancelled send delivered its value")
        }
    }

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("blocked senders and receivers cancelled while another thread closes the channel")
    func cancelVersusClose() async throws {
        try await CK.withSchedulers(2, "wq-cc") { s in
            let other = Channel<Int>()   // never closed, shared by all rounds: must stay clean
            for round in 0..<150 {
                let ch = Channel<Int>(), ch2 = Channel<Int>(capacity: round % 2)
                if round % 2 == 1 { #expect(try ch2.trySend(-1)) }   // full: senders block
                let outcomes = Kit.Log<String>()
                let waiters = (0..<6).map { k in
                    Coroutine.launch(on: s[k % 2]) {
                        let o: String
                        switch k % 3 {
                        case 0: o = CK.outcome { _ = try ch.receive() }
                        case 1: o = CK.outcome { try ch2.send(k) }
                        default:
                            o = CK.result {
                                try select { sel in
                                    sel.receive(from: ch) { $0 == nil ? "closed" : "value" }
                                    sel.receive(from: other) { _ in "other" }
                                    sel.send(k, to: ch2) { "sent" }
                                    sel.receive(from: ch) { $0 == nil ? "closed" : "value" }
                                }
                            }
                        }
                        outcomes.append(o)
                    }
                }
                try await Kit.run {
                    try CK.waitUntilSuspended(waiters)
                    let closer = Coroutine.launch(on: s[1]) { ch.close(); ch2.close() }
                    jitter(round)
                    for (k, w) in waiters.enumerated() where (k + round) % 2 == 0 { w.cancel() }
                    try closer.join()
                    for w in waiters { try w.join() }
                    // The selects' records in `other` were withdrawn: nobody waits there now.
                    #expect(try other.trySend(1) == false)
                    #expect(try other.tryReceive() == nil)
                }
                let all = outcomes.all
                #expect(all.count == 6)
                #expect(all.allSatisfy { $0 == "closed" || $0 == "cancelled" }, "\(all)")
            }
        }
    }

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("plain threads trySend and tryReceive against waiters that time out and are cancelled: every value once")
    func plainThreadsPopWithdrawingWaiters() async throws {
        try await CK.withSchedulers(2, "wq-plain") { s in
            let ch = Channel<Int>()
            let received = Kit.Log<Int>()    // by the coroutines
            let sentByThreads = Kit.Log<Int>()
            let sentByCoroutines = Kit.Log<Int>()
            let takenByThreads = Kit.Log<Int>()
            let stop = Atomic<Bool>(false)
            let coroutines = (0..<6).map { k in
                Coroutine.launch(on: s[k % 2]) {
                    var i = 0
                    while !stop.load(ordering: .relaxed) {
                        i += 1
                        do {
                            try Coroutine.withTimeout(.microseconds(1 + i % 25)) {
                                if k % 2 == 0 {
                                    received.append(try ch.receive())
                                } else {
                                    let v = -(k * 1_000_000 + i)
                                    try ch.send(v)
                                    sentByCoroutines.append(v)
                                }
                            }
                        } catch CoroutineError.timedOut {}
                    }
                }
            }
            try await Kit.onPlainThreads(2) { t in
                // At least 20,000 attempts, and on until each side met waiters (bounded).
                var i = 0, met = 0
                while i < 900_000 && (i < 20_000 || met < 100) {
                    let v = t * 1_000_000 + i
                    if (try? ch.trySend(v)) == true { sentByThreads.append(v); met += 1 }
                    if let x = try? ch.tryReceive() { takenByThreads.append(x); met += 1 }
                    i += 1
                }
            }
            stop.store(true, ordering: .relaxed)
            try await Kit.run {
                for c in coroutines { try c.join(); #expect(c.error == nil) }
                #expect(try ch.trySend(0) == false)
                #expect(try ch.tryReceive() == nil)
            }
            let sent = (sentByThreads.all + sentByCoroutines.all).sorted()
            let got = (received.all + takenByThreads.all).sorted()
            #expect(sent == got, "\(sent.count) sent, \(got.count) received: lost or duplicated values")
            #expect(sentByThreads.all.count + takenByThreads.all.count > 0, "the threads never met a waiter")
        }
    }

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("async send and receive (bridged coroutines) cancelled by their tasks while peers hand off: every value once")
    func bridgedOperationsCancelled() async throws {
        let ch = Channel<Int>()
        let got = Kit.Log<Int>()
        let sent = Kit.Log<Int>()
        for round in 0..<300 {
            let receiver = Task { do { got.append(try await ch.receive()) } catch {} }
            let sender = Task { do { try await ch.send(round); sent.append(round) } catch {} }
            spin(microseconds: round % 60)
            if round % 2 == 0 { receiver.cancel(); jitter(round * 5); sender.cancel() } else { sender.cancel(); jitter(round * 5); receiver.cancel() }
            await receiver.value
            await sender.value
            // The hand-off happened on both sides or on neither.
            #expect(got.all.contains(round) == sent.all.contains(round), "round \(round)")
        }
        #expect(try ch.trySend(0) == false)
        #expect(try ch.tryReceive() == nil)
        #expect(got.all == sent.all)
    }

    // MARK: Timeouts around channel operations (one coroutine, the same frame address every time)

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("receives under tight withTimeout scopes racing with a sender on another thread: every value once, in order")
    func timedOutReceivesKeepFIFO() async throws {
        try await CK.withSchedulers(2, "wq-tr") { s in
            let ch = Channel<Int>()
            let n = 3000
            let sender = Coroutine.launch(on: s[1]) {
                for i in 0..<n {
                    try ch.send(i)
                    if i % 7 == 0 { jitter(i) }
                }
            }
            let got = try await Kit.run { () -> [Int] in
                var got: [Int] = []
                var k = 0
                while got.count < n {
                    k += 1
                    do {
                        got.append(try Coroutine.withTimeout(.microseconds(k % 40)) { try ch.receive() })
                    } catch CoroutineError.timedOut {}
                }
                return got
            }
            try await sender.join()
            #expect(got == Array(0..<n))
        }
    }

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("sends under tight withTimeout scopes, retried, racing with a receiver on another thread: every value once, in order")
    func timedOutSendsKeepFIFO() async throws {
        try await CK.withSchedulers(2, "wq-ts") { s in
            let ch = Channel<Int>()
            let n = 3000
            let received = Kit.Log<Int>()
            let receiver = Coroutine.launch(on: s[1]) {
                var i = 0
                while let v = try? ch.receive() {
                    received.append(v)
                    i += 1
                    if i % 5 == 0 { jitter(i) }
                }
            }
            let timeouts = try await Kit.run { () -> Int in
                var timeouts = 0, fails = 0
                var i = 0
                while i < n {
                    do {
                        try Coroutine.withTimeout(.microseconds(1 + i % 30 + 10 * fails)) { try ch.send(i) }
                        i += 1
                        fails = 0
                    } catch CoroutineError.timedOut {
                        timeouts += 1
                        fails += 1
                    }
                }
                ch.close()
                return timeouts
            }
            try await receiver.join()
            #expect(received.all == Array(0..<n))
            _ = timeouts
        }
    }

    // MARK: FIFO after removals from the middle of a queue

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("withdrawn senders and select cases leave the remaining waiters in FIFO order")
    func fifoAfterMiddleRemovals() async throws {
        try await Kit.withScheduler("wq-fifo") { s in
            for pattern in 0..<16 {
                let ch = Channel<Int>()
                let side = Channel<Int>()
                var launched: [Coroutine] = []
                for i in 0..<10 {
                    let c = Coroutine.launch(on: s) {
                        if i % 3 == 1 {
                            _ = try select { sel in
                                sel.receive(from: side) { _ in 0 }
                                sel.send(i, to: ch) { 0 }
                                sel.receive(from: side) { _ in 0 }
                            }
                        } else {
                            try ch.send(i)
                        }
                    }
                    launched.append(c)
                    try await Kit.run { try CK.waitUntilSuspended(c) }
                }
                let waiters = launched
                // Cancel a pattern-dependent subset, including the first and the last.
                let cancelled = (0..<10).filter { ($0 * 7 + pattern) % 4 == 0 || ($0 == 0 && pattern % 2 == 0) || ($0 == 9 && pattern % 3 == 0) }
                for i in cancelled { waiters[i].cancel() }
                let got = try await Kit.run { () -> [Int] in
                    for i in cancelled { try waiters[i].join() }
                    var got: [Int] = []
                    for _ in 0..<(10 - cancelled.count) { got.append(try ch.receive()) }
                    #expect(try side.trySend(0) == false)
                    #expect(try ch.tryReceive() == nil)
                    return got
                }
                #expect(got == (0..<10).filter { !cancelled.contains($0) }, "pattern \(pattern)")
                for c in waiters { try await c.join() }
            }
        }
    }

    // MARK: A stack reused right after a wait

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("blocked receivers and senders that time out leave no record: the next coroutines on their stacks scribble, then the channel still hands off")
    func stackReuseAfterTimeout() async throws {
        try await Kit.withScheduler("wq-reuse-t") { s in
            let ch = Channel<Int>()
            for round in 0..<100 {
                let w = Coroutine.launch(on: s) {
                    _ = try? Coroutine.withTimeout(.microseconds(200)) {
                        if round % 2 == 0 { _ = try ch.receive() } else { try ch.send(-1) }
                    }
                }
                try await w.join()
                let scribbler = Coroutine.launch(on: s) { scribble(round + 1) }
                try await scribbler.join()
                let v = try await Kit.run { () -> Int? in
                    #expect(try ch.trySend(1) == false)
                    #expect(try ch.tryReceive() == nil)
                    let r = Coroutine.launch(on: s) { try ch.send(round) }
                    let v = try ch.receive()
                    try r.join()
                    return v
                }
                #expect(v == round)
            }
        }
    }

    // MARK: produce

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    @Test("produce consumers on another thread cancelled mid-stream; values taken are a FIFO prefix, the channel is clean")
    func produceCancelled() async throws {
        try await CK.withSchedulers(2, "wq-prod") { s in
            for round in 0..<100 {
                let got = Kit.Log<Int>()
                let consumer = Coroutine.launch(on: s[1]) {
                    let ch = Coroutine.produce(on: s[0]) { ch in
                        for i in 0..<1000 { try ch.send(i) }
                    }
                    defer { ch.close() }
                    for v in ch { got.append(v) }
                }
                try await Kit.run {
                    jitter(round * 7)
                    try Coroutine.delay(.microseconds(round % 50))
                    consumer.cancel()
                    try consumer.join()
                }
                #expect(got.all == Array(0..<got.all.count))
            }
        }
    }
}
