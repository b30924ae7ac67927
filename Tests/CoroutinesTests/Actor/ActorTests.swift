import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

/// Mailbox actors, as the Actors article states them (<doc:Actors>).
@Suite("Actors")
struct ActorTests {
    enum CounterMessage: Sendable { case add(Int), get }

    /// A counter actor; its body returns when the mailbox loop ends.
    static func makeCounter(on scheduler: CoroutineScheduler? = nil,
                            afterLoop: CoroutineTestKit.Log<String>? = nil) -> CoroutineActor<CounterMessage, Int> {
        CoroutineActor<CounterMessage, Int>(on: scheduler) { mailbox in
            var total = 0
            for envelope in mailbox {
                switch envelope.message {
                case .add(let n):
                    total += n
                    envelope.reply(total)
                case .get:
                    envelope.reply(total)
                }
            }
            afterLoop?.append("after loop")
        }
    }

    @Test("six +1, one −1, then get → 5 (the counter example of the Actors article)")
    func counterScenario() async throws {
        let total = try await Kit.run { () -> Int in
            let counter = Self.makeCounter()
            defer { counter.cancel() }
            for _ in 0..<6 { counter.send(.add(1)) }
            counter.send(.add(-1))
            return try counter.send(.get).await()
        }
        #expect(total == 5)
    }

    @Test("100 × +1 and 90 × −1 from two coroutines → 10")
    func counterFromTwoCoroutines() async throws {
        let total = try await Kit.run { () -> Int in
            let counter = Self.makeCounter()
            defer { counter.cancel() }
            let up = Coroutine.async { for _ in 0..<100 { _ = try counter.send(.add(1)).await() } }
            let down = Coroutine.async { for _ in 0..<90 { _ = try counter.send(.add(-1)).await() } }
            try up.await()
            try down.await()
            return try counter.send(.get).await()
        }
        #expect(total == 10)
    }

    @Test("messages are handled one at a time, in FIFO order, even when the body suspends")
    func fifoAndOneAtATime() async throws {
        let handled = Kit.Log<Int>()
        let inside = Kit.Box(0)        // touched only by the actor's coroutine
        let maxInside = Kit.Box(0)
        try await Kit.run {
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    inside.value += 1
                    maxInside.value = max(maxInside.value, inside.value)
                    try Coroutine.yield()                 // suspend while handling
                    handled.append(envelope.message)
                    inside.value -= 1
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            let replies = (0..<20).map { actor.send($0) }
            for (i, p) in replies.enumerated() {
                let reply = try p.await()
                #expect(reply == i)
            }
        }
        #expect(handled.all == Array(0..<20))
        #expect(maxInside.value == 1)
    }

    @Test("a reply with the error of an awaited rejected promise makes the sender's await throw it")
    func replyWithAwaitedError() async throws {
        struct Boom: Error, Equatable {}
        let caught = try await Kit.run { () -> (any Error)? in
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    do {
                        let p = Promise<Int>()
                        CoroutineScheduler.current?.execute { p.reject(Boom()) }
                        envelope.reply(try p.await())
                    } catch {
                        envelope.fail(error)
                    }
                }
            }
            defer { actor.cancel() }
            do {
                _ = try actor.send(1).await()
                return nil
            } catch {
                return error
            }
        }
        #expect(caught as? Boom == Boom())
    }

    @Test("the first answer wins; a second reply or fail is ignored")
    func secondAnswerIgnored() async throws {
        let value = try await Kit.run { () -> Int in
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    envelope.reply(1)
                    envelope.reply(2)
                    envelope.fail(CancellationError())
                    #expect(envelope.isAnswered)
                }
            }
            defer { actor.cancel() }
            return try actor.send(0).await()
        }
        #expect(value == 1)
    }

    @Test("an envelope dropped without an answer rejects with noReply; the next is still handled")
    func droppedEnvelopeRejectsNoReply() async throws {
        let (first, second) = try await Kit.run { () -> ((any Error)?, Int) in
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox where envelope.message != 0 {
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            let dropped = actor.send(0)
            let answered = actor.send(7)
            var error: (any Error)?
            do { _ = try dropped.await() } catch let e { error = e }
            return (error, try answered.await())
        }
        #expect(first as? ActorError == .noReply)
        #expect(second == 70)
    }

    @Test("an envelope kept by the body can be answered later, from another thread")
    func answerLaterFromAnotherThread() async throws {
        let value = try await Kit.run { () -> Int in
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    Thread { envelope.reply(envelope.message + 1) }.start()
                }
            }
            defer { actor.cancel() }
            return try actor.send(41).await()
        }
        #expect(value == 42)
    }

    @Test("if the body throws, the envelope in hand is rejected with that error and queued ones with terminated")
    func bodyErrorRejectsEnvelopeInHand() async throws {
        struct Broken: Error, Equatable {}
        let (inHand, queued, later, bodyError) = try await Kit.run { () -> ((any Error)?, (any Error)?, (any Error)?, (any Error)?) in
            let gate = Promise<Void>()
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    try gate.await()                 // the second message queues meanwhile
                    if envelope.message == 1 { throw Broken() }
                    envelope.reply(0)
                }
            }
            let first = actor.send(1)
            let second = actor.send(2)
            gate.fulfill(())
            func failure(of p: Promise<Int>) -> (any Error)? {
                if case .failure(let e) = Result(catching: { try p.await() }) { return e }
                return nil
            }
            let e1 = failure(of: first), e2 = failure(of: second)
            try actor.coroutine.join()
            return (e1, e2, failure(of: actor.send(3)), actor.coroutine.error)
        }
        #expect(inHand as? Broken == Broken())
        #expect(queued as? ActorError == .terminated)
        #expect(later as? ActorError == .terminated)
        #expect(bodyError as? Broken == Broken())
    }

    @Test("cancel ends the loop at its next iteration: code after the loop runs once, later messages are terminated")
    func cancelEndsLoop() async throws {
        let log = Kit.Log<String>()
        let (beforeCancel, afterCancel) = try await Kit.run { () -> (Int, (any Error)?) in
            let counter = Self.makeCounter(afterLoop: log)
            let v = try counter.send(.add(3)).await()
            counter.cancel()
            try counter.coroutine.join()
            var error: (any Error)?
            do { _ = try counter.send(.get).await() } catch let e { error = e }
            return (v, error)
        }
        #expect(beforeCancel == 3)
        #expect(afterCancel as? ActorError == .terminated)
        #expect(log.all == ["after loop"])
    }

    @Test("the envelope being handled when the actor is cancelled can still be answered")
    func envelopeInHandAnsweredAfterCancel() async throws {
        let value = try await Kit.run { () -> Int in
            let started = Promise<Void>()
            let actor = CoroutineActor<Int, Int> { mailbox in
                for envelope in mailbox {
                    started.fulfill(())
                    _ = try? Coroutine.delay(hangBound)   // interrupted by the cancellation
                    envelope.reply(envelope.message)
                }
            }
            let reply = actor.send(9)
            try started.await()
            actor.cancel()
            return try reply.await()
        }
        #expect(value == 9)
    }

    @Test("an actor cancelled before it starts rejects every message with terminated")
    func cancelledBeforeStart() async throws {
        let errors = try await Kit.run { () -> [(any Error)?] in
            let actor = Self.makeCounter()
            let queued = actor.send(.get)
            actor.cancel()                            // before the actor's coroutine ran
            let late = actor.send(.get)
            return [queued, late].map { p in
                do { _ = try p.await(); return nil } catch { return error }
            }
        }
        #expect(errors.count == 2)
        for e in errors { #expect(e as? ActorError == .terminated) }
    }

    @Test("1,000 messages from 10 coroutines on different schedulers are each answered exactly once")
    func manySendersAcrossSchedulers() async throws {
        let pool = try #require(SchedulerPool(name: "actor-test", count: 4))
        let replies = try await Kit.run { () -> [Int] in
            let actor = CoroutineActor<Int, Int>(on: pool.next()) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message) }
            }
            defer { actor.cancel() }
            let senders = (0..<10).map { s in
                Coroutine.async(on: pool.next()) { () -> [Int] in
                    try (0..<100).map { i in try actor.send(s * 100 + i).await() }
                }
            }
            return try senders.flatMap { try $0.await() }
        }
        #expect(replies.sorted() == Array(0..<1000))
    }

    @Test("send works from plain threads, outside any coroutine")
    func sendFromPlainThreads() async throws {
        let actor = Self.makeCounter(on: SchedulerPool.default(for: .default).next())
        defer { actor.cancel() }
        try await Kit.onPlainThreads(8) { _ in
            for _ in 0..<50 { actor.send(.add(1)) }
        }
        #expect(try await actor.send(.get).value == 400)
    }
}
