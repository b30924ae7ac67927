import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit
private typealias Item = ChannelTestKit.Item

/// An object that counts its deinitialisations, to check that a select destroys what its cases
/// own exactly once.
private final class Token: Sendable {
    let id: Int
    let destroyed: Kit.Counter
    init(_ id: Int, _ destroyed: Kit.Counter) {
        self.id = id
        self.destroyed = destroyed
    }
    deinit { destroyed.increment() }
}

private struct BuildFailed: Error {}

/// A value larger than the select's stack buffer, with reference-counted fields.
private struct Big: Sendable {
    var items: [Item]
    var label: String
    var padding: SIMD32<Int64> = .zero
}

/// How select keeps its cases: on the coroutine's stack for a few small cases, on the heap
/// beyond that (the rules of `select` in <doc:ChannelsAndSelect> must not depend on which).
@Suite("Select case storage")
struct SelectStorageTests {
    @Test("a channel's lock address, through which select locks it, lies inside the channel object at one offset for every element type")
    func lockAddressInsideChannel() throws {
        func offset<E: Sendable>(_ channel: Channel<E>) -> Int {
            let object = UnsafeRawPointer(Unmanaged.passUnretained(channel).toOpaque())
            let lock = UnsafeRawPointer(channel.lockAddress)
            #expect(lock == UnsafeRawPointer(channel.lockAddress), "the address is not stable")
            return lock - object
        }
        let offsets = [offset(Channel<Int>()), offset(Channel<String>(capacity: 3)),
                       offset(Channel<[Double]>(capacity: .unbounded)), offset(Channel<UInt8>())]
        #expect(Set(offsets).count == 1, "offsets \(offsets)")
        #expect(offsets[0] >= 2 * MemoryLayout<Int>.size && offsets[0] < 64, "offsets \(offsets)")
        // Taking the lock through its address is seen by the channel's own operations.
        let ch = Channel<Int>(capacity: 1)
        ch.lockAddress.pointee.lock()
        #expect(ch.lock.word.load(ordering: .relaxed) != 0, "the channel's lock is not held")
        ch.lockAddress.pointee.unlock()
        #expect(try ch.trySend(1))
    }

    @Test("a select with more cases than fit on the stack runs the ready one")
    func manyCasesReady() async throws {
        let r = try await Kit.run { () -> String in
            let receives = (0..<6).map { _ in Channel<Int>(capacity: 1) }
            let full = Channel<Int>(capacity: 1)
            try full.send(0)   // a send case on `full` is not ready
            try receives[4].send(44)
            return try select { s in
                for (k, channel) in receives.enumerated() {
                    s.receive(from: channel) { "receive \(k): \($0 ?? -1)" }
                }
                s.send(1, to: full) { "sent 1" }
                s.send(2, to: full) { "sent 2" }
            }
        }
        #expect(r == "receive 4: 44")
    }

    @Test("a blocked select with more cases than fit on the stack is woken, and leaves no waiter behind")
    func manyCasesBlocked() async throws {
        let (r, leftovers) = try await Kit.run { () -> (String, [Bool]) in
            let channels = (0..<7).map { _ in Channel<Int>() }
            let me = Coroutine.current!
            Coroutine.launch {
                try CK.waitUntilSuspended(me)
                try channels[5].send(55)
            }
            let r: String = try select { s in
                for (k, channel) in channels.enumerated() {
                    s.receive(from: channel) { "receive \(k): \($0 ?? -1)" }
                }
            }
            // No receiver of the select is still queued: a send finds nobody.
            return (r, try channels.map { try $0.trySend(1) })
        }
        #expect(r == "receive 5: 55")
        #expect(leftovers == Array(repeating: false, count: 7))
    }

    @Test("a send case that does not run neither delivers nor leaks its value", arguments: ["ready", "blocked"])
    func unsentValueDestroyed(mode: String) async throws {
        let destroyed = Kit.Counter()
        let (r, leftover) = try await Kit.run { () -> (String, Int?) in
            let a = Channel<Int>(capacity: 1)
            let b = Channel<Token>()   // rendezvous, nobody receives: the send case is never ready
            if mode == "ready" {
                try a.send(7)
            } else {
                let me = Coroutine.current!
                Coroutine.launch {
                    try CK.waitUntilSuspended(me)
                    try a.send(7)
                }
            }
            let r: String = try select { s in
                s.receive(from: a) { "a \($0 ?? -1)" }
                s.send(Token(1, destroyed), to: b) { "sent" }
            }
            return (r, try b.tryReceive()?.id)
        }
        #expect(r == "a 7")
        #expect(leftover == nil)
        #expect(destroyed.value == 1)
    }

    @Test("a send case's value reaches the receiver once, and the select keeps no copy")
    func sentValueDelivered() async throws {
        let destroyed = Kit.Counter()
        let (r, id, destroyedWhileHeld) = try await Kit.run { () -> (String, Int, Int) in
            let b = Channel<Token>()
            let got = Kit.Box<(id: Int, destroyed: Int)>((-1, -1))
            let receiver = Coroutine.launch {
                let token = try b.receive()
                got.value = (token.id, destroyed.value)
            }
            try CK.waitUntilSuspended(receiver)
            let r: String = try select { s in
                s.send(Token(3, destroyed), to: b) { "sent" }
            }
            try receiver.join()
            return (r, got.value.id, got.value.destroyed)
        }
        #expect(r == "sent")
        #expect(id == 3)
        #expect(destroyedWhileHeld == 0)
        #expect(destroyed.value == 1)
    }

    @Test("values too large for the stack buffer travel intact in both directions")
    func largeValues() async throws {
        let (received, sent) = try await Kit.run { () -> (SIMD64<Int64>, SIMD64<Int64>) in
            let ramp = SIMD64<Int64>((0..<64).map { Int64($0) })
            let incoming = Channel<SIMD64<Int64>>(capacity: 1)
            let outgoing = Channel<SIMD64<Int64>>(capacity: 1)
            try incoming.send(ramp &* 3)
            let received: SIMD64<Int64> = try select { s in
                s.receive(from: incoming) { $0 ?? .zero }
                s.receive(from: Channel<SIMD64<Int64>>()) { _ in .zero }   // never ready
            }
            let full = Channel<SIMD64<Int64>>(capacity: 1)
            try full.send(.zero)
            try select { s in
                s.send(ramp &+ 1, to: outgoing) {}
                s.send(ramp, to: full) {}   // not ready
            }
            return (received, try outgoing.receive())
        }
        let ramp = SIMD64<Int64>((0..<64).map { Int64($0) })
        #expect(received == ramp &* 3)
        #expect(sent == ramp &+ 1)
    }

    @Test("the bodies' captured values are released after the select, whichever case ran")
    func capturingBodiesReleased() async throws {
        let destroyed = Kit.Counter()
        let r = try await Kit.run { () -> String in
            let a = Channel<Int>(capacity: 1), b = Channel<Int>(), c = Channel<Int>()
            try a.send(1)
            return try Self.selectCapturing(a, b, c, destroyed)
        }
        #expect(r == "a 1 from 10")
        #expect(destroyed.value == 4)
    }

    /// A select whose every body captures its own token; the tokens live only in the bodies.
    private static func selectCapturing(_ a: Channel<Int>, _ b: Channel<Int>, _ c: Channel<Int>,
                                        _ destroyed: Kit.Counter) throws -> String {
        let ta = Token(10, destroyed), tb = Token(11, destroyed), tc = Token(12, destroyed)
        let to = Token(13, destroyed)
        return try select { s in
            s.receive(from: a) { "a \($0 ?? -1) from \(ta.id)" }
            s.receive(from: b) { "b \($0 ?? -1) from \(tb.id)" }
            s.send(5, to: c) { "c from \(tc.id)" }
            s.otherwise { "otherwise from \(to.id)" }
        }
    }

    @Test("a build closure that throws after adding cases destroys them and throws")
    func throwingBuild() async throws {
        let destroyed = Kit.Counter()
        let threw = try await Kit.run { () -> Bool in
            let a = Channel<Token>(), b = Channel<Int>()
            do {
                let _: Int = try select { s in
                    s.send(Token(1, destroyed), to: a) { 1 }
                    s.receive(from: b) { _ in 2 }
                    throw BuildFailed()
                }
                return false
            } catch is BuildFailed {
                return true
            }
        }
        #expect(threw)
        #expect(destroyed.value == 1)
    }

    /// From the tests written against select's cases in a stack buffer: many cases, large values
    /// with reference-counted fields, captured contexts, races with close and cancellation, select
    /// in generators.
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

    /// From the tests written against select's cases in a stack buffer: many cases, large values
    /// with reference-counted fields, captured contexts, races with close and cancellation, select
    /// in generators.
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

    // MARK: Losing send cases

    /// Counts live instances, to catch leaked or doubly released channel values.
    final class Live: Sendable {
        let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .sequentiallyConsistent) }
    }

    final class Tracked: Sendable {
        let live: Live
        init(_ live: Live) {
            self.live = live
            live.count.wrappingAdd(1, ordering: .sequentiallyConsistent)
        }
        deinit { live.count.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
    }

    enum Loser: CaseIterable, Sendable { case receiveWins, otherSendWins, timeoutWins, cancelled }

    /// A regression test: it failed before its fix.
    @Test("a select's send case that does not win leaves no copy of its value alive", arguments: Loser.allCases)
    func losingSendCaseReleasesItsValue(_ loser: Loser) async throws {
        let live = Live()
        try await CoroutineTestKit.run {
            let out = Channel<Tracked>(), other = Channel<Tracked>(), input = Channel<Int>()
            let selecting = Coroutine.launch {
                _ = try? select { s in
                    s.send(Tracked(live), to: out) { "sent" }
                    switch loser {
                    case .receiveWins: s.receive(from: input) { _ in "received" }
                    case .otherSendWins: s.send(Tracked(live), to: other) { "other" }
                    case .timeoutWins: s.timeout(after: .milliseconds(5)) { "timeout" }
                    case .cancelled: break
                    }
                }
            }
            try ChannelTestKit.waitUntilSuspended(selecting)
            switch loser {
            case .receiveWins: try input.send(7)
            case .otherSendWins: _ = try other.receive()
            case .timeoutWins: break
            case .cancelled: selecting.cancel()
            }
            try selecting.join()
        }
        #expect(live.value == 0)
    }
}
