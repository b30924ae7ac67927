import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Counts its deinitialisations.
private final class Item: Sendable {
    let id: Int
    let destroyed: Kit.Counter
    init(_ id: Int, _ created: Kit.Counter, _ destroyed: Kit.Counter) {
        self.id = id
        self.destroyed = destroyed
        created.increment()
    }
    deinit { destroyed.increment() }
}

/// A value larger than the select's stack buffer, with reference-counted fields.
private struct Big: Sendable {
    var items: [Item]
    var label: String
    var padding: SIMD32<Int64> = .zero
}

/// Adversarial tests for `select` with cases in a stack buffer: many cases, non-trivial and
/// large values, captured contexts, races with close and cancellation, select in generators.
@Suite("select storage under races")
struct SelectBreakTests {
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
                        sel.timeout(after: .seconds(30)) { t.id }
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

    @Test("large values with reference-counted fields through select (stack buffer overflow to the heap)")
    func largeNonTrivialValues() async throws {
        let created = Kit.Counter()
        let destroyed = Kit.Counter()
        let got = try await Kit.run { () -> [String] in
            var results: [String] = []
            let big = Channel<Big>(capacity: 2)
            let other = Channel<Big>()
            for i in 0..<20 {
                let value = Big(items: (0..<3).map { Item(i * 10 + $0, created, destroyed) }, label: "big \(i) " + String(repeating: "y", count: 40))
                let unsent = Big(items: [Item(-1, created, destroyed)], label: "unsent")
                let r: String = try select { s in
                    s.send(value, to: big) { "sent \(i)" }
                    s.send(unsent, to: other) { "never" }     // no receiver: never ready
                    s.receive(from: other) { "never \($0?.label ?? "")" }
                    s.receive(from: Channel<Big>()) { _ in "never" }
                    s.send(unsent, to: Channel<Big>()) { "never" }
                }
                results.append(r)
                let back: String = try select { s in
                    s.receive(from: big) { "\($0!.label) \($0!.items.map(\.id))" }
                    s.receive(from: other) { _ in "never" }
                }
                results.append(back)
            }
            return results
        }
        #expect(got.count == 40)
        #expect(got[1] == "big 0 \(String(repeating: "y", count: 40)) [0, 1, 2]")
        #expect(got[39] == "big 19 \(String(repeating: "y", count: 40)) [190, 191, 192]")
        #expect(created.value == 80)
        #expect(destroyed.value == 80)
    }

    @Test("select inside a generator body, suspending its host coroutine, with many cases")
    func selectInsideGenerator() async throws {
        let r = try await Kit.run { () -> [Int] in
            let chans = (0..<6).map { _ in Channel<Int>() }
            let producer = Coroutine.launch {
                for i in 0..<60 { try chans[(i * 7) % 6].send(i) }
                for ch in chans { ch.close() }
            }
            var open = Set(0..<6)
            let g = Generator<Int> { yield in
                while !open.isEmpty {
                    let v: Int? = try select { s in
                        for (k, ch) in chans.enumerated() where open.contains(k) {
                            s.receive(from: ch) { v in
                                if v == nil { open.remove(k) }
                                return v
                            }
                        }
                    }
                    if let v { try yield(v) }
                }
            }
            var out: [Int] = []
            for v in g { out.append(v) }
            try producer.join()
            return out
        }
        #expect(r.sorted() == Array(0..<60))
    }

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
}
