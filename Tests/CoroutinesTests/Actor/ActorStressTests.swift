import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Actors under races: cancelled while other threads post messages (<doc:Actors>).
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Actors under races", .serialized)
struct ActorStressTests {
    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
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
    /// The mailbox parks its actor without a lock (Mailbox.swift, invariant 3): a post that
    /// lands while the actor is about to park must still wake it. Each round ends with the
    /// senders waiting for their last reply, so a lost wake-up would leave them waiting for ever.
    @Test("bursts sent from two other schedulers while the actor keeps parking: every burst is answered, none waits for a wake-up that was lost")
    func burstsRaceTheActorParking() async throws {
        let answered = try await CK.withSchedulers(3, "mailbox-park") { s -> [Int] in
            let actor = CoroutineActor<Int, Int>(on: s[0]) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message) }
            }
            defer { actor.cancel() }
            let senders = (1...2).map { t in
                Coroutine.async(on: s[t]) { () -> Int in
                    var answered = 0
                    for round in 0..<3_000 {
                        let burst = (0..<(round % 3 + 1)).map { actor.send(t * 1_000_000 + round * 4 + $0) }
                        for (k, p) in burst.enumerated() where try p.await() == t * 1_000_000 + round * 4 + k {
                            answered += 1
                        }
                    }
                    return answered
                }
            }
            var answered: [Int] = []
            for sender in senders { answered.append(try await sender.value) }
            return answered
        }
        #expect(answered == [6_000, 6_000])
    }
}
