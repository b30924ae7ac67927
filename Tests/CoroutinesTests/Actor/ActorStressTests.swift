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
}
