import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// `CoroutineActor.request`: the contract of `send(_:).await()` without a promise, and the direct
/// hand-off to an idle actor on the caller's scheduler (<doc:Actors>).
@Suite("Actor requests")
struct ActorRequestTests {
    struct Refused: Error, Equatable {}

    /// An actor that adds each message to a total and replies with it.
    fileprivate static func makeAdder(on scheduler: CoroutineScheduler? = nil, log: Kit.Log<String>? = nil) -> CoroutineActor<Int, Int> {
        CoroutineActor<Int, Int>(on: scheduler) { mailbox in
            var total = 0
            for envelope in mailbox {
                total += envelope.message
                log?.append("actor \(envelope.message)")
                envelope.reply(total)
            }
        }
    }

    @Test("requests are answered in order with the actor's replies")
    func repliesInOrder() async throws {
        let replies = try await Kit.run { () -> [Int] in
            let adder = Self.makeAdder()
            defer { adder.cancel() }
            return try (1...5).map { try adder.request($0) }
        }
        #expect(replies == [1, 3, 6, 10, 15])
    }

    @Test("to an idle actor on the caller's scheduler, the actor runs and the caller resumes before coroutines queued earlier (the stated FIFO exception)")
    func directHandOffRunsBeforeQueuedCoroutines() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            let adder = Self.makeAdder(on: CoroutineScheduler.current, log: log)
            defer { adder.cancel() }
            _ = try adder.request(0)            // the actor now waits for its next message
            // Given a coroutine queued on this scheduler before the request
            Coroutine.launch { log.append("queued earlier") }
            // When the request is made
            let total = try adder.request(1)
            log.append("caller resumed with \(total)")
            try Coroutine.yield()               // lets the queued coroutine run
        }
        // Then the actor handled it and the caller resumed before the queued coroutine ran
        #expect(log.all == ["actor 0", "actor 1", "caller resumed with 1", "queued earlier"])
    }

    @Test("a requester and an actor handing off to each other do not starve a coroutine queued on their scheduler")
    func handOffsAreBounded() async throws {
        let done = Kit.Box(-1)
        let requests = 1_000
        try await Kit.run {
            let adder = Self.makeAdder(on: CoroutineScheduler.current)
            defer { adder.cancel() }
            _ = try adder.request(0)
            let progress = Kit.Box(0)
            // Given a coroutine queued behind a long run of requests
            Coroutine.launch { done.value = progress.value }
            // When the caller makes 1,000 requests without any other suspension
            for i in 1...requests {
                _ = try adder.request(1)
                progress.value = i
            }
        }
        // Then the queued coroutine ran before the run of requests ended (a bounded exception)
        #expect(done.value >= 0 && done.value < requests, "the queued coroutine ran after \(done.value) requests")
    }

    @Test("hand-offs separated by other coroutines' turns are not in a row: the caller of each of 40 such requests resumes before a coroutine queued just before it")
    func handOffStreakCountsOnlyHandOffsInARow() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            let adder = Self.makeAdder(on: CoroutineScheduler.current)
            defer { adder.cancel() }
            _ = try adder.request(0)            // the actor now waits for its next message (idle)
            for k in 0..<40 {
                // Given a coroutine queued before the request
                Coroutine.launch { log.append("queued \(k)") }
                // When the request is made (two hand-offs), and then the queued coroutine runs
                // (ending the run of hand-offs)
                _ = try adder.request(1)
                log.append("resumed \(k)")
                try Coroutine.yield()
            }
        }
        // Then in every round the caller resumed before the coroutine queued earlier
        let late = (0..<40).filter { k in
            (log.all.firstIndex(of: "queued \(k)") ?? 0) < (log.all.firstIndex(of: "resumed \(k)") ?? 0)
        }
        #expect(late.isEmpty, "rounds where the queued coroutine ran first: \(late)")
    }

    @Test("requesters whose messages queued behind a busy actor on their scheduler are woken as for any suspension: in the order the actor answered them")
    func queuedRequestersResumeInAnswerOrder() async throws {
        let log = Kit.Log<String>()
        try await Kit.withScheduler("request-busy-order") { s in
            let gate = Promise<Void>()
            let handling = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    if envelope.message == -1 { handling.fulfill(()); try gate.await() }
                    log.append("answered \(envelope.message)")
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            // Given a busy actor, and 10 requests queued behind it by coroutines on its scheduler
            let first = Coroutine.async(on: s) { try actor.request(-1) }
            try await handling.value
            let requesters = (0..<10).map { i in
                Coroutine.async(on: s) { () -> Int in
                    let r = try actor.request(i)
                    log.append("resumed \(i)")
                    return r
                }
            }
            #expect(await Kit.eventually { actor.mailbox.count == 10 })
            // When the actor answers them back to back
            gate.fulfill(())
            _ = try await first.value
            for r in requesters { _ = try await r.value }
        }
        // Then they resume in the order they were answered
        let resumed = log.all.filter { $0.hasPrefix("resumed") }
        #expect(resumed == (0..<10).map { "resumed \($0)" }, "\(resumed)")
    }

    @Test("a request to an actor on another scheduler is answered")
    func requestFromAnotherScheduler() async throws {
        try await Kit.withScheduler("request-actor") { s in
            let adder = Self.makeAdder(on: s)
            defer { adder.cancel() }
            let replies = try await Kit.run { try (1...3).map { try adder.request($0 * 10) } }
            #expect(replies == [10, 30, 60])
        }
    }

    @Test("the actor's fail, a dropped envelope and a body that throws while holding the envelope are thrown by request")
    func errorsAreThrown() async throws {
        enum Message: Sendable { case refuse, drop, crash }
        let outcomes = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Message, Int> { mailbox in
                for envelope in mailbox {
                    switch envelope.message {
                    case .refuse: envelope.fail(Refused())
                    case .drop: break
                    case .crash: throw Refused()
                    }
                }
            }
            defer { actor.cancel() }
            var outcomes: [String] = []
            for m in [Message.refuse, .drop, .crash, .refuse] {
                do { _ = try actor.request(m); outcomes.append("replied") } catch { outcomes.append("\(error)") }
            }
            return outcomes
        }
        #expect(outcomes == ["\(Refused())", "\(ActorError.noReply)", "\(Refused())", "\(ActorError.terminated)"])
    }

    @Test("a request to an actor that ended, or that ends before handling it, throws terminated")
    func terminated() async throws {
        try await Kit.withScheduler("request-terminated") { s in
            let release = Promise<Void>()
            let handling = Promise<Void>()
            // An actor that handles one message, waiting for `release`, then ends.
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    handling.fulfill(())
                    try release.await()
                    envelope.reply(envelope.message)
                    return
                }
            }
            let first = Coroutine.async { try actor.request(1) }
            try await handling.value                                              // 1 is being handled
            let second = Coroutine.async { try actor.request(2) }
            #expect(await Kit.eventually { actor.mailbox.count == 1 })   // the second is queued
            release.fulfill(())
            #expect(try await first.value == 1)
            await #expect(throws: ActorError.terminated) { try await second.value }
            try await actor.coroutine.join()
            await #expect(throws: ActorError.terminated) { try await Coroutine.async { try actor.request(3) }.value }
        }
    }

    @Test("an actor requesting from itself gets requestFromItself instead of waiting for ever")
    func requestFromItself() async throws {
        let box = Kit.Box<CoroutineActor<Int, Int>?>(nil)
        let actor = CoroutineActor<Int, Int> { mailbox in
            for envelope in mailbox {
                do { envelope.reply(try box.value!.request(envelope.message)) } catch { envelope.fail(error) }
            }
        }
        box.value = actor
        defer { actor.cancel(); box.value = nil }
        await #expect(throws: ActorError.requestFromItself) { try await actor.send(1).value }
    }

    @Test("a requester cancelled while its message waits throws CancellationError; the actor still handles the message and its answer is dropped")
    func cancelledRequester() async throws {
        try await Kit.withScheduler("request-cancel") { s in
            let release = Promise<Void>()
            let handled = Kit.Log<Int>()
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 { try release.await() }
                    handled.append(envelope.message)
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            // Given a busy actor and a second request queued behind the first
            let first = Coroutine.async(on: s) { try actor.request(1) }
            let second = Coroutine.async(on: s) { try actor.request(2) }
            #expect(await Kit.eventually { actor.mailbox.count == 1 })
            // When the second requester is cancelled while it waits
            second.cancel()
            await #expect(throws: CancellationError.self) { try await second.value }
            // Then the actor still handles both, in order, and answers the first
            release.fulfill(())
            let firstReply = try await first.value
            let third = try await Coroutine.async(on: s) { try actor.request(3) }.value
            #expect(firstReply == 1)
            #expect(third == 3)
            #expect(handled.all == [1, 2, 3])
        }
    }

    @Test("a request inside an expiring withTimeout throws timedOut; outside a coroutine it throws notInCoroutine")
    func timeoutAndMisuse() async throws {
        try await Kit.withScheduler("request-timeout") { s in
            let release = Promise<Void>()
            // Holds the envelope of 0, unanswered, until released.
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 0 { try release.await() }
                    envelope.reply(envelope.message)
                }
            }
            defer { release.fulfill(()); actor.cancel() }
            let outcome = try await Coroutine.async(on: s) { () -> String in
                do { _ = try Coroutine.withTimeout(.milliseconds(20)) { try actor.request(0) }; return "replied" }
                catch CoroutineError.timedOut { return "timed out" }
            }.value
            #expect(outcome == "timed out")
            #expect(throws: CoroutineError.notInCoroutine) { try actor.request(1) }
        }
    }
}
