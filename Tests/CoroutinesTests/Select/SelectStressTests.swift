import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit
private typealias Item = ChannelTestKit.Item

/// select under races: cases on the same channels as peers on other threads, `close`,
/// cancellation and timeouts (<doc:ChannelsAndSelect>).
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("select under races", .serialized)
struct SelectStressTests {
    // MARK: Close, cancellation and timeouts racing selects

    /// Guards an invariant (`close` chains the claimed records of the waiters it wakes).
    @Test("close races selects naming one channel twice, on three schedulers: each select ends once, closed or with a value")
    func closeRacesSelectSameChannelTwice() async throws {
        try await ChannelTestKit.withSchedulers(3, "sel") { schedulers in
            let weak = Kit.WeakCoroutines()
            for round in 0..<40 {
                let ch = Channel<Int>()
                let outcomes = Kit.Log<String>()
                let selectors = (0..<6).map { k in
                    Coroutine.launch(on: schedulers[k % 3]) {
                        let r: String
                        if k % 2 == 0 {
                            // Two receive cases on the same channel.
                            r = try select { s in
                                s.receive(from: ch) { $0.map { "a\($0)" } ?? "closed" }
                                s.receive(from: ch) { $0.map { "b\($0)" } ?? "closed" }
                            }
                        } else {
                            // A send and a receive case on the same channel.
                            do {
                                r = try select { s in
                                    s.send(round * 100 + k, to: ch) { "sent" }
                                    s.receive(from: ch) { $0.map { "got\($0)" } ?? "closed" }
                                }
                            } catch ChannelError.closed {
                                outcomes.append("send-closed")
                                return
                            }
                        }
                        outcomes.append(r)
                    }
                }
                for c in selectors { weak.add(c) }
                let closer = Coroutine.launch(on: schedulers[round % 3]) {
                    if round % 2 == 0 { try Coroutine.yield() }
                    _ = ch.close()
                }
                for c in selectors { try await c.join() }
                try await closer.join()
                let all = outcomes.all
                #expect(all.count == 6)
                // Each "sent" pairs with exactly one receive that got a value.
                let sent = all.filter { $0 == "sent" }.count
                let got = all.filter { $0.hasPrefix("a") || $0.hasPrefix("b") || $0.hasPrefix("got") }.count
                #expect(sent == got, "round \(round): \(all)")
            }
            #expect(await Kit.eventually { weak.alive == 0 })
        }
    }

    /// From the tests written against select's cases in a stack buffer: many cases, large values
    /// with reference-counted fields, captured contexts, races with close and cancellation, select
    /// in generators.
    @Test("six send cases of objects and two receives, racing with close and cancel: every object destroyed once, none delivered twice")
    func sendCasesRacingCloseAndCancel() async throws {
        let created = Kit.Counter()
        let destroyed = Kit.Counter()
        let delivered = Kit.Log<Int>()
        let a = CoroutineScheduler(name: "sel-a")
        let b = CoroutineScheduler(name: "sel-b")
        defer { a.stop(); b.stop() }
        for round in 0..<30 {
            let outs = (0..<6).map { _ in Channel<Item>() }
            let ins = (0..<2).map { _ in Channel<String>() }
            let selectors = (0..<4).map { k in
                Coroutine.launch(on: k % 2 == 0 ? a : b) {
                    var i = 0
                    while true {
                        i += 1
                        let base = (round * 4 + k) * 1_000_000 + i * 10
                        do {
                            let r: String = try select { s in
                                for (j, ch) in outs.enumerated() {
                                    s.send(Item(base + j, created, destroyed), to: ch) { "sent \(j)" }
                                }
                                for (j, ch) in ins.enumerated() {
                                    s.receive(from: ch) { "got \(j): \($0 ?? "nil")" }
                                }
                                if i % 3 == 0 { s.timeout(after: .microseconds(50)) { "timeout" } }
                            }
                            _ = r
                        } catch is ChannelError {
                            return
                        }
                    }
                }
            }
            let receivers = (0..<3).map { k in
                Coroutine.launch(on: k % 2 == 0 ? b : a) {
                    while true {
                        let got: Item?? = try select { s in
                            for ch in outs { s.receive(from: ch) { Optional($0) } }
                        }
                        guard let item = got, let item else { return }
                        delivered.append(item.id)
                    }
                }
            }
            let stringSender = Coroutine.launch(on: a) {
                for i in 0..<50 { try ins[i % 2].send("string number \(i) \(String(repeating: "x", count: i))") }
            }
            try await Kit.run {
                try stringSender.join()
                try Coroutine.delay(.milliseconds(2))
                // Close some channels from another thread while selects run, cancel a selector.
                selectors[round % 4].cancel()
                for ch in outs.prefix(3) { ch.close() }
                try Coroutine.delay(.milliseconds(1))
                for ch in outs.dropFirst(3) { ch.close() }
                for c in receivers { try c.join() }
                for ch in ins { ch.close() }
                for c in selectors { try c.join() }
            }
        }
        let ids = delivered.all
        #expect(Set(ids).count == ids.count, "a value was delivered twice")
        #expect(await Kit.eventually { created.value == destroyed.value },
                "\(created.value) created, \(destroyed.value) destroyed")
    }

    /// From the tests written against select's cases in a stack buffer: many cases, large values
    /// with reference-counted fields, captured contexts, races with close and cancellation, select
    /// in generators.
    @Test("a blocked select of many capturing cases, cancelled or woken: the captured objects are released once")
    func capturedContextsReleased() async throws {
        let created = Kit.Counter()
        let destroyed = Kit.Counter()
        try await Kit.withScheduler("sel-capture") { s in
            for round in 0..<100 {
                let chans = (0..<7).map { _ in Channel<Int>() }
                let c = Coroutine.launch(on: s) {
                    let captured = (0..<9).map { Item($0, created, destroyed) }
                    let r: Int = try select { sel in
                        for (j, ch) in chans.enumerated() {
                            let mine = captured[j]
                            sel.receive(from: ch) { v in (v ?? -1) + mine.id }
                        }
                        let t = captured[7]
                        sel.timeout(after: hangBound) { t.id }
                        let o = captured[8]
                        if round % 5 == 0 { sel.otherwise { o.id } }
                    }
                    if round % 5 == 0 { precondition(r == 8) }
                    else { precondition(r == 1000 + (round % 7)) }
                }
                if round % 5 != 0 {
                    if round % 2 == 0 {
                        try await Kit.run {
                            try CK.waitUntilSuspended(c)
                            try chans[round % 7].send(1000)
                        }
                    } else {
                        try await Kit.run { try CK.waitUntilSuspended(c) }
                        c.cancel()
                    }
                }
                try await c.join()
            }
        }
        #expect(created.value == 900)
        #expect(await Kit.eventually { destroyed.value == 900 }, "\(destroyed.value) of 900 destroyed")
    }

    /// From the tests written against select's cases in a stack buffer: many cases, large values
    /// with reference-counted fields, captured contexts, races with close and cancellation, select
    /// in generators.
    @Test("select timeouts racing with senders on other schedulers: no value is lost or duplicated")
    func timeoutsRacingSenders() async throws {
        let a = CoroutineScheduler(name: "race-a")
        defer { a.stop() }
        let received = Kit.Log<Int>()
        let sent = Kit.Log<Int>()
        let chans = (0..<5).map { _ in Channel<String>() }
        let senders = (0..<5).map { k in
            Coroutine.launch(on: a) {
                for i in 0..<400 {
                    let v = k * 10_000 + i
                    let r: Bool = try select { s in
                        s.send("value \(v)", to: chans[k]) { true }
                        s.timeout(after: .microseconds(Int64(i % 40))) { false }
                    }
                    if r { sent.append(v) }
                }
            }
        }
        try await Kit.run {
            var misses = 0
            while misses < 200 {
                let r: String? = try select { s in
                    for ch in chans { s.receive(from: ch) { $0 } }
                    s.timeout(after: .microseconds(30)) { nil }
                }
                if let r { received.append(Int(r.dropFirst(6))!); misses = 0 } else { misses += 1 }
                if senders.allSatisfy(\.isFinished) { misses += 1 }
            }
            for c in senders { try c.join() }
        }
        #expect(received.all.sorted() == sent.all.sorted())
    }

    /// From the tests written against select's cases in a stack buffer: many cases, large values
    /// with reference-counted fields, captured contexts, races with close and cancellation, select
    /// in generators.
    @Test("selects listing channels of different element types in opposite orders, with duplicates, on several threads: no deadlock, conservation")
    func lockOrderAcrossElementTypes() async throws {
        try await CK.withSchedulers(3, "sel-order") { s in
            // Each select locks the distinct channels of its cases in address order, whatever
            // the order and types of its cases, and a channel in several cases only once.
            let ints = Channel<Int>(capacity: 2), strings = Channel<String>(), doubles = Channel<Double>(capacity: 1)
            let sent = Kit.Log<Int>()
            let received = Kit.Log<Int>()
            let n = 1500
            let workers = (0..<6).map { k in
                Coroutine.launch(on: s[k % 3]) {
                    for i in 0..<n {
                        let v = k * 100_000 + i
                        let r: Int? = try select { sel in
                            switch (k + i) % 3 {
                            case 0:
                                sel.send(v, to: ints) { -1 }
                                sel.receive(from: strings) { $0.flatMap { Int($0) } }
                                sel.receive(from: doubles) { $0.map { Int($0) } }
                            case 1:
                                sel.receive(from: doubles) { $0.map { Int($0) } }
                                sel.send(String(v), to: strings) { -1 }
                                sel.receive(from: ints) { $0 }
                                sel.receive(from: doubles) { $0.map { Int($0) } }
                            default:
                                sel.receive(from: ints) { $0 }
                                sel.send(Double(v), to: doubles) { -1 }
                                sel.receive(from: strings) { $0.flatMap { Int($0) } }
                                sel.receive(from: ints) { $0 }
                                sel.send(String(v), to: strings) { -1 }
                            }
                            sel.timeout(after: .microseconds(i % 30)) { nil }
                        }
                        if let r { if r == -1 { sent.append(v) } else { received.append(r) } }
                    }
                }
            }
            try await Kit.run {
                for w in workers { try w.join() }
                for w in workers { #expect(w.error == nil) }
                // Drain what is still buffered.
                while let v = try ints.tryReceive() { received.append(v) }
                while let v = try doubles.tryReceive() { received.append(Int(v)) }
                #expect(try strings.tryReceive() == nil)
            }
            #expect(sent.all.sorted() == received.all.sorted(), "\(sent.all.count) sent, \(received.all.count) received")
            #expect(sent.all.count > 0)
        }
    }

    // MARK: Wait-queue records of select cases, on the coroutine's stack

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
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

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
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

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
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

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
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

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
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
}
