import CCoroutines
import Foundation
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// A direct request's envelope that the actor lets go of, held by nothing else, is kept and
/// reused by the next direct request (`Mailbox.swift` invariant 10, <doc:Actors>). Nothing may
/// observe the reuse: an envelope the body keeps a reference to — strong, weak or unowned —
/// stays the envelope of its own message, and a spare never holds a message's resources.
@Suite("Actor envelope reuse")
struct EnvelopeReuseTests {
    /// The reuse is off under ThreadSanitizer and AddressSanitizer (invariant 10).
    static var reuses: Bool { ccoro_fibers_active == 0 }

    @Test("an envelope the body dropped is reused by the next direct request, with the new message and a fresh answer; one dropped unanswered still answers noReply")
    func droppedEnvelopeIsReused() async throws {
        let (seen, replies) = try await Kit.run { () -> ([ObjectIdentifier], [String]) in
            let seen = Kit.Log<ObjectIdentifier>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    seen.append(ObjectIdentifier(envelope))
                    if envelope.message != 2 { envelope.reply(envelope.message * 10) }   // 2: dropped
                }
            }
            defer { actor.cancel() }
            var replies: [String] = []
            for m in 0..<5 {
                do { replies.append("\(try actor.request(m))") } catch { replies.append("\(error)") }
            }
            return (seen.all, replies)
        }
        #expect(replies == ["0", "10", "\(ActorError.noReply)", "30", "40"])
        #expect(seen.count == 5)
        if Self.reuses {
            // The first request starts the actor: from the second on, each reuses the one before.
            #expect(Set(seen.dropFirst()).count == 1)
        }
    }

    @Test("an envelope the body keeps a strong reference to is never reused: each kept envelope keeps its own message and answer")
    func stronglyKeptEnvelopeIsNotReused() async throws {
        let (replies, messages, answered, distinct) = try await Kit.run { () -> ([Int], [Int], [Bool], Int) in
            let kept = Kit.Log<Envelope<Int, Int>>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    kept.append(envelope)
                    envelope.reply(envelope.message + 100)
                }
            }
            defer { actor.cancel() }
            let replies = try (0..<6).map { try actor.request($0) }
            let all = kept.all
            return (replies, all.map(\.message), all.map(\.isAnswered), Set(all.map(ObjectIdentifier.init)).count)
        }
        #expect(replies == (0..<6).map { $0 + 100 })
        #expect(messages == Array(0..<6))
        #expect(answered == Array(repeating: true, count: 6))
        #expect(distinct == 6)
    }

    @Test("an envelope the body keeps a weak reference to is never reused: the reference goes nil when the actor lets go of it")
    func weaklyKeptEnvelopeIsNotReused() async throws {
        let observed = try await Kit.run { () -> [String] in
            let observed = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                weak var previous: Envelope<Int, Int>?
                for envelope in mailbox {
                    // Reused, `previous` would be this very envelope, showing the new message.
                    observed.append(previous.map { "previous alive, message \($0.message)" } ?? "previous gone")
                    previous = envelope
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            for m in 0..<4 { _ = try actor.request(m) }
            return observed.all
        }
        #expect(observed == Array(repeating: "previous gone", count: 4))
    }

    @Test("an envelope the body keeps an unowned reference to is never reused: the next request gets another object")
    func unownedKeptEnvelopeIsNotReused() async throws {
        let sameAsPrevious = try await Kit.run { () -> [Bool] in
            let sameAsPrevious = Kit.Log<Bool>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                var previous: UnownedEnvelope?
                for envelope in mailbox {
                    // The unowned reference keeps the old object's memory: a new envelope cannot
                    // have its address, a reused one would.
                    sameAsPrevious.append(previous?.id == ObjectIdentifier(envelope))
                    previous = UnownedEnvelope(envelope)
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            for m in 0..<4 { _ = try actor.request(m) }
            return sameAsPrevious.all
        }
        #expect(sameAsPrevious == Array(repeating: false, count: 4))
    }

    @Test("a message holding references is released once the actor lets go of its envelope: a spare never keeps one")
    func messageWithReferencesIsReleased() async throws {
        let released = Kit.Counter()
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = CoroutineActor<Kit.Tracker, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox { envelope.reply(1) }
            }
            defer { actor.cancel() }
            for _ in 0..<3 {
                _ = try actor.request(Kit.Tracker(released))
                // The actor let go of the envelope before it parked and switched back here.
                log.append("released \(released.value)")
            }
            return log.all
        }
        #expect(log == ["released 1", "released 2", "released 3"])
    }

    @Test("a direct request answered from a plain thread while the actor runs on gets that answer, whether or not the envelope is then kept; the next request starts unanswered")
    func reusedEnvelopeAnsweredElsewhere() async throws {
        let replies = try await Kit.run { () -> [Int] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message % 2 == 1 {
                        // Answered on a plain thread while the actor waits without suspending: the
                        // requester still waits directly, and that thread may let go of the
                        // envelope before or after the actor does.
                        let answered = Kit.Counter()
                        let e = envelope
                        Thread.detachNewThread {
                            e.reply(e.message * 10)
                            answered.increment()
                        }
                        while answered.value == 0 { sched_yield() }
                    } else {
                        envelope.reply(envelope.message * 10)
                    }
                }
            }
            defer { actor.cancel() }
            return try (0..<8).map { try actor.request($0) }
        }
        #expect(replies == (0..<8).map { $0 * 10 })
    }
}

/// An unowned reference to an envelope, with the envelope's identity taken while it was alive.
private final class UnownedEnvelope {
    unowned(safe) let envelope: Envelope<Int, Int>
    let id: ObjectIdentifier
    init(_ envelope: Envelope<Int, Int>) {
        self.envelope = envelope
        id = ObjectIdentifier(envelope)
    }
}
