import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Adversarial tests for the intrusive channel wait queues (ChannelWaiter.swift): every waiter
/// record lives on its coroutine's stack and must be unlinked before its frame ends. The channels
/// live across rounds, so a record left linked by one round would be popped by a later round from
/// a frame that a new coroutine (reusing the pooled stack) or a new wait has overwritten. Each test
/// checks that every value is delivered exactly once (and in FIFO order where that is defined).
@Suite("wait queue records under races", .serialized)
struct WaitQueueBreakTests {
    // MARK: Cancellation racing with a hand-off

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

    // MARK: select: the same channel in several cases, losing cases popped by other threads

    @Test("selects with a send and a receive case on the same channel pair with each other across threads: conservation")
    func selectSendAndReceiveSameChannel() async throws {
        try await CK.withSchedulers(2, "wq-sr") { s in
            let ch = Channel<Int>()
            let sent = Kit.Log<Int>()
            let received = Kit.Log<Int>()
            let workers = (0..<6).map { k in
                Coroutine.launch(on: s[k % 2]) {
                    for i in 0..<600 {
                        let v = k * 1_000_000 + i
                        let r: Int? = try select { sel in
                            sel.send(v, to: ch) { -1 }
                            sel.receive(from: ch) { $0 }
                            if i % 2 == 0 { sel.receive(from: ch) { $0 } }   // two receives on one channel
                            sel.timeout(after: .microseconds(i % 50)) { nil }
                        }
                        if let r { if r == -1 { sent.append(v) } else { received.append(r) } }
                    }
                }
            }
            try await Kit.run {
                for w in workers { try w.join() }
                for w in workers { #expect(w.error == nil) }
                // Nobody waits any more: every record was withdrawn or popped.
                #expect(try ch.trySend(0) == false)
                #expect(try ch.tryReceive() == nil)
            }
            let s = sent.all.sorted(), r = received.all.sorted()
            #expect(s == r, "\(s.count) sent, \(r.count) received")
            #expect(s.count > 0)
        }
    }

    @Test("selects of seven cases (on the heap) with duplicate channels, a timeout and cancellation, against peers on other threads")
    func bigSelectAgainstPeers() async throws {
        try await CK.withSchedulers(3, "wq-big") { s in
            let x = Channel<Int>(), y = Channel<Int>(capacity: 1), z = Channel<Int>()
            let got = Kit.Log<Int>()      // received by the selects
            let taken = Kit.Log<Int>()    // received from z by the peers
            let offered = Kit.Log<Int>()  // sent to z by the selects
            let n = 4000
            let producers = [x, y].enumerated().map { (j, ch) in
                Coroutine.launch(on: s[1 + j]) {
                    for i in 0..<n { try ch.send(j * 1_000_000 + i) }
                }
            }
            let drain = Coroutine.launch(on: s[2]) {
                while let v = try? z.receive() { taken.append(v) }
            }
            let selectors = (0..<4).map { k in
                Coroutine.launch(on: s[k % 3]) {
                    var i = 0
                    while true {
                        i += 1
                        let mine = 2_000_000 + k * 100_000 + i
                        let r: Int?
                        do {
                            r = try select { sel in
                                sel.receive(from: x) { $0 }
                                sel.receive(from: y) { $0 }
                                sel.receive(from: x) { $0 }
                                sel.send(mine, to: z) { -1 }
                                sel.receive(from: y) { $0 }
                                sel.send(mine, to: z) { -1 }
                                sel.receive(from: z) { $0.map { -$0 - 10 } }   // never pairs with itself
                                sel.timeout(after: .microseconds(i % 20)) { -2 }
                            }
                        } catch is CancellationError { return }
                        guard let r else { return }   // x or y closed
                        if r == -1 { offered.append(mine) } else if r >= 0 { got.append(r) } else if r <= -10 { got.append(-r - 10) }
                    }
                }
            }
            try await Kit.run {
                for p in producers { try p.join() }
                // Everything produced was received; then stop the selectors.
                while got.all.filter({ $0 < 2_000_000 }).count < 2 * n { try Coroutine.delay(.milliseconds(1)) }
                selectors[0].cancel()
                x.close(); y.close()
                for c in selectors { try c.join() }
                z.close()
                try drain.join()
            }
            let fromProducers = got.all.filter { $0 < 2_000_000 }
            #expect(fromProducers.sorted() == (Array(0..<n) + Array(1_000_000..<1_000_000 + n)).sorted())
            let viaZ = got.all.filter { $0 >= 2_000_000 } + taken.all
            #expect(viaZ.sorted() == offered.all.sorted(), "values through z lost or duplicated")
        }
    }

    @Test("a select cancelled while wakers on other threads pop its records: no value lost, none taken twice")
    func selectCancelledWhilePopped() async throws {
        try await CK.withSchedulers(3, "wq-scp") { s in
            let a = Channel<Int>(), b = Channel<Int>()
            let received = Kit.Log<Int>()
            for round in 0..<300 {
                let sel = Coroutine.launch(on: s[0]) {
                    do {
                        let v: Int = try select { sel in
                            sel.receive(from: a) { $0 ?? -1 }
                            sel.receive(from: b) { $0 ?? -1 }
                            sel.receive(from: a) { $0 ?? -1 }
                        }
                        received.append(v)
                    } catch is CancellationError {}
                }
                try await Kit.run {
                    try CK.waitUntilSuspended(sel)
                    let pa = Coroutine.launch(on: s[1]) { try a.send(2 * round) }
                    let pb = Coroutine.launch(on: s[2]) { try b.send(2 * round + 1) }
                    jitter(round)
                    sel.cancel()
                    try sel.join()
                    #expect(sel.error == nil)
                    // Whatever the select did not take is still with its sender.
                    let mine = received.all
                    if !mine.contains(2 * round) { #expect(try a.receive() == 2 * round) }
                    if !mine.contains(2 * round + 1) { #expect(try b.receive() == 2 * round + 1) }
                    try pa.join(); try pb.join()
                    #expect(try a.tryReceive() == nil)
                    #expect(try b.tryReceive() == nil)
                }
            }
            let all = received.all
            #expect(Set(all).count == all.count)
            #expect(all.allSatisfy { $0 >= 0 })
        }
    }

    @Test("selects racing with close of one of their channels from another thread")
    func selectVersusClose() async throws {
        try await CK.withSchedulers(2, "wq-scl") { s in
            let keep = Channel<Int>()   // never closed, shared by all rounds
            let sink = Channel<Int>()   // never received from
            for round in 0..<200 {
                let doomed = Channel<Int>(capacity: round % 2)
                let results = Kit.Log<String>()
                let sels = (0..<5).map { k in
                    Coroutine.launch(on: s[k % 2]) {
                        results.append(CK.result {
                            try select { sel in
                                sel.receive(from: keep) { "keep \($0!)" }
                                sel.receive(from: doomed) { $0 == nil ? "closed" : "value" }
                                if k % 2 == 0 { sel.send(k, to: sink) { "sent sink" } }
                                sel.receive(from: keep) { "keep \($0!)" }
                                sel.receive(from: doomed) { $0 == nil ? "closed" : "value" }
                            }
                        })
                    }
                }
                try await Kit.run {
                    try CK.waitUntilSuspended(sels)
                    let closer = Coroutine.launch(on: s[1]) { doomed.close() }
                    jitter(round)
                    try closer.join()
                    for c in sels { try c.join() }
                    #expect(try keep.trySend(1) == false, "a select record left in keep's queue")
                    #expect(try keep.tryReceive() == nil)
                    #expect(try sink.tryReceive() == nil, "a select record left in sink's queue")
                }
                #expect(results.all.count == 5)
                #expect(results.all.allSatisfy { $0 == "closed" }, "\(results.all)")
            }
        }
    }

    // MARK: FIFO after removals from the middle of a queue

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

    @Test("after a select wins, times out or is cancelled, the next coroutine on the same stack scribbles over it: the other channels are clean")
    func stackReuseAfterSelect() async throws {
        try await Kit.withScheduler("wq-reuse") { s in
            let a = Channel<Int>(), b = Channel<Int>(), c = Channel<Int>()
            for round in 0..<60 {
                let how = round % 3
                let sel = Coroutine.launch(on: s) {
                    _ = try? select { sel in
                        sel.receive(from: a) { $0 ?? 0 }
                        sel.receive(from: b) { $0 ?? 0 }
                        sel.send(round, to: c) { 0 }
                        sel.receive(from: b) { $0 ?? 0 }
                        sel.receive(from: c) { $0 ?? 0 }
                        if how == 1 { sel.timeout(after: .milliseconds(1)) { 0 } }
                    }
                }
                try await Kit.run {
                    if how != 1 { try CK.waitUntilSuspended(sel) }
                    switch how {
                    case 0: try a.send(round)
                    case 2: sel.cancel()
                    default: break
                    }
                    try sel.join()
                    // Overwrite the stack the select ran on (the pool hands it to the next coroutine).
                    let scribbler = Coroutine.launch(on: s) { scribble(Int.random(in: 1...1000)) }
                    try scribbler.join()
                    #expect(try b.trySend(1) == false, "a record left in b's queue")
                    #expect(try c.trySend(1) == false, "a record left in c's receivers")
                    #expect(try c.tryReceive() == nil, "a record left in c's senders")
                    #expect(try a.trySend(1) == false)
                }
            }
        }
    }

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

    // MARK: Generators, produce, actors

    @Test("generators hosted by a coroutine select on channels fed from other threads and are dropped mid-stream: every value once")
    func generatorsSelecting() async throws {
        try await CK.withSchedulers(2, "wq-gen") { s in
            let a = Channel<Int>(), b = Channel<Int>()
            let n = 1500
            let feeders = [a, b].enumerated().map { (j, ch) in
                Coroutine.launch(on: s[j]) { for i in 0..<n { try ch.send(j * 100_000 + i) } }
            }
            let got = try await Kit.run { () -> [Int] in
                var got: [Int] = []
                var round = 0
                while got.count < 2 * n {
                    round += 1
                    let take = 1 + round % 4
                    let r = round
                    let g = Generator<Int> { yield in
                        while true {
                            let v: Int? = try select { sel in
                                sel.receive(from: a) { $0 }
                                sel.receive(from: b) { $0 }
                                sel.timeout(after: .microseconds(r % 30)) { nil }
                            }
                            if let v { try yield(v) }
                        }
                    }
                    for v in g.prefix(take) { got.append(v) }
                }
                return got
            }
            for f in feeders { try await f.join() }
            #expect(got.filter { $0 < 100_000 } == Array(0..<n))
            #expect(got.filter { $0 >= 100_000 } == Array(100_000..<100_000 + n))
        }
    }

    @Test("actors cancelled while messages are posted from other threads: every message answered once, the replies a FIFO prefix")
    func actorsCancelledWhilePosting() async throws {
        try await CK.withSchedulers(2, "wq-actor") { s in
            for round in 0..<100 {
                let handled = Kit.Counter()
                let actor = CoroutineActor<Int, Int>(on: s[0]) { mailbox in
                    for envelope in mailbox {
                        handled.increment()
                        envelope.reply(envelope.message)
                    }
                }
                let promises = Kit.Box<[Promise<Int>]>([])
                let poster = Coroutine.launch(on: s[1]) {
                    var ps: [Promise<Int>] = []
                    for i in 0..<40 { ps.append(actor.send(i)); if i % 8 == 0 { try Coroutine.yield() } }
                    promises.value = ps
                }
                jitter(round * 13)
                actor.cancel()
                try await poster.join()
                try await actor.coroutine.join()
                var replies: [Int] = []
                var rejected = 0
                for p in promises.value {
                    do { replies.append(try await p.value) } catch { rejected += 1 }
                }
                #expect(replies.count + rejected == 40)
                #expect(replies == Array(0..<replies.count), "round \(round): \(replies)")
                #expect(handled.value == replies.count)
            }
        }
    }

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

