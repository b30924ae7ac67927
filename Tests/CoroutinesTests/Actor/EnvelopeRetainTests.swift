import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Counts the messages destroyed, so that a test can tell every envelope was released once.
private final class DestroyedCount: Sendable {
    let value = Atomic<Int>(0)
}

/// A message that reports its own destruction: it dies with its envelope.
private final class Tracked: Sendable {
    let count: DestroyedCount
    init(_ count: DestroyedCount) { self.count = count }
    deinit { count.value.add(1, ordering: .relaxed) }
}

/// The mailbox takes its reference to a direct request's envelope with a plain increment, since
/// no other thread can reach that envelope yet (`Mailbox.swift`, invariant 11); to any other
/// envelope, atomically. Either way each envelope must be destroyed exactly once: a lost or an
/// extra change to its count would leak it or free it under the actor. (A plain increment
/// wrongly applied to posted envelopes races with their senders' releases in a window of a few
/// nanoseconds, which these tests did not hit in 600,000 posts: the condition that keeps it to
/// direct envelopes is checked by reading, not by these tests.)
@Suite("Actor envelopes: the mailbox's reference", .serialized)
struct EnvelopeRetainTests {
    @Test("envelopes sent from two plain threads, which let go of them while the actor takes them, are each destroyed exactly once")
    func postedEnvelopesAreReleasedOnce() async throws {
        let destroyed = DestroyedCount()
        let perThread = 20_000
        let handled = Atomic<Int>(0)
        try await Kit.withScheduler("envelope-retain") { scheduler in
            let actor = CoroutineActor<Tracked, Int>(on: scheduler) { mailbox in
                for envelope in mailbox {
                    envelope.reply(handled.add(1, ordering: .relaxed).newValue)
                }
            }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let finished = Atomic<Int>(0)
                for _ in 0..<2 {
                    Thread {
                        for _ in 0..<perThread { _ = actor.send(Tracked(destroyed)) }
                        if finished.add(1, ordering: .acquiringAndReleasing).newValue == 2 { done.resume() }
                    }.start()
                }
            }
            // FIFO: once this is answered, every earlier message has been handled.
            let last = try await actor.send(Tracked(destroyed)).value
            #expect(last == 2 * perThread + 1)
            actor.cancel()
            try? await actor.coroutine.join()
        }
        // The body has ended and the mailbox holds nothing: every envelope, and its message, is
        // gone — neither leaked (a lost decrement) nor destroyed twice (a lost increment).
        #expect(destroyed.value.load(ordering: .relaxed) == 2 * perThread + 1)
    }

    @Test("a direct request's envelope the body keeps stays alive and answered after the actor has moved on, and is destroyed once when the body lets go of it")
    func keptDirectEnvelopeIsReleasedOnce() async throws {
        let destroyed = DestroyedCount()
        let kept = Mutex<[Envelope<Tracked, Int>]>([])
        let replies = try await Kit.run { () -> [Int] in
            let actor = CoroutineActor<Tracked, Int>(on: CoroutineScheduler.current) { mailbox in
                var n = 0
                for envelope in mailbox {
                    n += 1
                    envelope.reply(n)
                    if n % 2 == 0 { kept.locked { $0.append(envelope) } }   // a second reference
                }
            }
            let replies = try (0..<100).map { _ in try actor.request(Tracked(destroyed)) }
            actor.cancel()
            try? actor.coroutine.join()   // the body has ended: the mailbox holds nothing
            return replies
        }
        #expect(replies == Array(1...100))
        let envelopes = kept.locked { $0 }
        #expect(envelopes.count == 50)
        #expect(envelopes.allSatisfy { $0.isAnswered })
        // The actor let go of the 50 it did not keep, and of its references to the kept ones.
        #expect(destroyed.value.load(ordering: .relaxed) == 50)
        kept.locked { $0.removeAll() }
        _ = consume envelopes
        #expect(destroyed.value.load(ordering: .relaxed) == 100)
    }
    @Test("with a trivial message (the spare is reused), envelopes the body keeps are each held by the keeper's reference alone once the actor has ended, and carry their own message and answer")
    func keptReusedEnvelopesHaveExactCounts() async throws {
        let kept = Mutex<[Envelope<Int, Int>]>([])
        let replies = try await Kit.run { () -> [Int] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    envelope.reply(envelope.message * 10)
                    // Every third is kept: the others go back as the spare, reused by the next.
                    if envelope.message % 3 == 0 { kept.locked { $0.append(envelope) } }
                }
            }
            let replies = try (1...300).map { try actor.request($0) }
            actor.cancel()
            try? actor.coroutine.join()   // the body has ended: the mailbox holds nothing
            return replies
        }
        #expect(replies == (1...300).map { $0 * 10 })
        var envelopes = kept.locked { $0 }
        kept.locked { $0.removeAll() }
        #expect(envelopes.map(\.message) == Array(stride(from: 3, through: 300, by: 3)))
        #expect(envelopes.allSatisfy { $0.isAnswered })
        // A count one too high (a lost decrement) or too low (a lost increment) shows here.
        for i in envelopes.indices {
            let message = envelopes[i].message
            let unique = isKnownUniquelyReferenced(&envelopes[i])
            #expect(unique, "envelope of \(message)")
        }
    }
}
