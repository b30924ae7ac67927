import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// A weak reference to an envelope, handed to another thread, which turns it into a strong one
/// and destroys the weak one as close together as it can.
private final class WeakHolder: @unchecked Sendable {
    weak var envelope: Envelope<Int, Int>?
    let message: Int
    init(_ e: Envelope<Int, Int>) { envelope = e; message = e.message }
    @inline(never)
    func upgradeAndDrop() -> Envelope<Int, Int>? {
        let s = envelope
        envelope = nil
        return s
    }
}

@Suite("Actor envelope reuse: reference kinds changing between the counts", .serialized)
struct EnvelopeReuseRaceTests {
    /// Read one by one, the strong, weak and unowned counts would let a thread holding only a
    /// weak reference make it strong after the first read and destroy the weak one before the
    /// second: the envelope would become the spare, rewritten by the next direct request under
    /// that thread's eyes. `Mailbox.finishInHand` decides by one load of the reference-count
    /// word (`Mailbox.swift`, invariant 10). The watcher aims its upgrade at the moment the actor
    /// lets go, moving its delay after each miss.
    @Test("a plain thread holding only a weak reference, upgrading it while the actor lets go of the envelope, never sees the envelope rewritten for another request")
    func weakUpgradedBetweenTheChecks() async throws {
        let slot = Mutex<WeakHolder?>(nil)
        let generation = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let observed = Kit.Log<String>()
        let watcher = Thread {
            var seen = generation.load(ordering: .acquiring)
            var delay = 64
            var rng = SystemRandomNumberGenerator()
            while !stop.load(ordering: .relaxed) {
                let g = generation.load(ordering: .acquiring)
                if g == seen { continue }
                seen = g
                guard let h = slot.locked({ $0.take() }) else { continue }
                let d = max(0, delay + Int.random(in: -8...8, using: &rng))
                var x = 0
                for i in 0..<d { x &+= Kit.opaque(i) }
                _ = Kit.opaque(x)
                if let s = h.upgradeAndDrop() {
                    delay += 1   // early: the actor had not let go yet, or kept it; aim later
                    // Held across the next request: a spare would now carry its message.
                    while generation.load(ordering: .acquiring) < seen + 2, !stop.load(ordering: .relaxed) {}
                    let m = s.message
                    if m != h.message { observed.append("envelope of \(h.message) now carries \(m), answered: \(s.isAnswered)") }
                } else {
                    delay = max(0, delay - 1)
                }
                seen = generation.load(ordering: .acquiring)   // a fresh publication next
            }
        }
        watcher.start()
        defer { stop.store(true, ordering: .relaxed) }
        let wrong = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    envelope.reply(envelope.message)
                    slot.locked { $0 = WeakHolder(envelope) }
                    generation.add(1, ordering: .releasing)
                }
            }
            defer { actor.cancel() }
            var wrong: [String] = []
            var i = 0
            for _ in 0..<30 where observed.all.isEmpty {
                for _ in 0..<1000 {
                    i += 1
                    let r = try actor.request(i)
                    if r != i { wrong.append("\(i) -> \(r)") }
                }
            }
            return wrong
        }
        stop.store(true, ordering: .relaxed)
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        #expect(observed.all.isEmpty, "\(observed.all.prefix(5))")
    }
    /// The same race, with the thread answering the envelope it holds: once the envelope has been
    /// reused, that answer goes to another request.
    @Test("a plain thread that upgraded its weak reference while the actor let go of the envelope and answers it later never answers another request")
    func weakUpgradedThenAnswered() async throws {
        let slot = Mutex<WeakHolder?>(nil)
        let published = Atomic<Int>(0)
        let handling = Atomic<Int>(0)
        let acked = Atomic<Int>(0)
        let holding = Atomic<Bool>(false)
        let stop = Atomic<Bool>(false)
        let watcher = Thread {
            var seen = published.load(ordering: .acquiring)
            var delay = 64
            while !stop.load(ordering: .relaxed) {
                let g = published.load(ordering: .acquiring)
                if g == seen { continue }
                seen = g
                guard let h = slot.locked({ $0.take() }) else { continue }
                let d = max(0, delay + Int.random(in: -8...8))
                var x = 0
                for i in 0..<d { x &+= Kit.opaque(i) }
                _ = Kit.opaque(x)
                if let s = h.upgradeAndDrop() {
                    delay += 1
                    holding.store(true, ordering: .sequentiallyConsistent)
                    let from = handling.load(ordering: .sequentiallyConsistent)
                    // The actor takes its next message (and waits for this answer, a little).
                    while handling.load(ordering: .acquiring) == from, !stop.load(ordering: .relaxed) {}
                    s.fail(Kit.NumberedBoom(n: -h.message))   // ignored: this envelope was answered
                    acked.store(handling.load(ordering: .acquiring), ordering: .releasing)
                    holding.store(false, ordering: .sequentiallyConsistent)
                } else {
                    delay = max(0, delay - 1)
                }
                seen = published.load(ordering: .acquiring)
            }
        }
        watcher.start()
        defer { stop.store(true, ordering: .relaxed) }
        let wrong = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    let n = handling.add(1, ordering: .sequentiallyConsistent).newValue
                    if holding.load(ordering: .sequentiallyConsistent) {
                        let end = ContinuousClock.now + .microseconds(200)
                        while acked.load(ordering: .acquiring) < n, ContinuousClock.now < end {}
                    }
                    envelope.reply(envelope.message)
                    slot.locked { $0 = WeakHolder(envelope) }
                    published.add(1, ordering: .releasing)
                }
            }
            defer { actor.cancel() }
            var wrong: [String] = []
            var i = 0
            for _ in 0..<30 where wrong.isEmpty {
                for _ in 0..<1000 {
                    i += 1
                    do {
                        let r = try actor.request(i)
                        if r != i { wrong.append("request \(i) got reply \(r)") }
                    } catch let e as Kit.NumberedBoom {
                        wrong.append("request \(i) got the answer meant for request \(-e.n)")
                    }
                }
            }
            return wrong
        }
        stop.store(true, ordering: .relaxed)
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }
}
