import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// A request to an actor idle on the caller's own scheduler is a direct hand-off: the caller
/// waits unarmed while the actor runs, and becomes an ordinary waiter when the actor suspends,
/// moves on or ends (<doc:Actors>, `Mailbox.swift` invariants 7–9).
@Suite("Actor direct requests")
struct ActorDirectRequestTests {
    struct Refused: Error, Equatable {}

    @Test("a direct requester cancelled while the actor handles its message without suspending gets that answer; its next suspension throws")
    func cancelledWhileTheActorRuns() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let requester = Kit.Box<Coroutine?>(nil)
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 {
                        requester.value?.cancel()
                        log.append("actor cancelled the requester")
                    }
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)   // the actor now waits for its next message
            let c = Coroutine.launch {
                requester.value = Coroutine.current
                let reply = try actor.request(1)
                log.append("replied \(reply)")
                do {
                    try Coroutine.yield()
                    log.append("yield returned")
                } catch {
                    log.append(error is CancellationError ? "then cancelled" : "then \(error)")
                }
            }
            try c.join()
            return log.all
        }
        #expect(log == ["actor cancelled the requester", "replied 10", "then cancelled"])
    }

    @Test("a direct requester whose actor suspends while handling its message is cancelled at once; the late answer is dropped and the next request gets its own")
    func cancelledWhileTheActorSuspends() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let handling = Promise<Void>()
            let gate = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 {
                        _ = handling.fulfill(())
                        try gate.await()
                        log.append("actor answers 1")
                    }
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)
            let requester = Coroutine.launch {
                do {
                    _ = try actor.request(1)
                    log.append("requester replied")
                } catch {
                    log.append(error is CancellationError ? "requester cancelled" : "requester \(error)")
                }
            }
            try handling.await()       // the actor now waits on the gate, holding the request
            requester.cancel()
            try requester.join()
            log.append("requester ended")
            _ = gate.fulfill(())
            log.append("next request \(try actor.request(2))")
            return log.all
        }
        #expect(log == ["requester cancelled", "requester ended", "actor answers 1", "next request 20"])
    }

    @Test("a direct requester cancelled while the actor runs, before the actor suspends without answering, throws CancellationError once the actor has suspended")
    func cancelledWhileUnarmedThenTheActorSuspends() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let requester = Kit.Box<Coroutine?>(nil)
            let gate = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 {
                        requester.value?.cancel()   // the requester waits unarmed: nothing to claim yet
                        log.append("actor cancelled the requester")
                        try gate.await()
                        log.append("actor answers 1")
                    }
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)
            let c = Coroutine.launch {
                requester.value = Coroutine.current
                do {
                    _ = try actor.request(1)
                    log.append("requester replied")
                } catch {
                    log.append(error is CancellationError ? "requester cancelled" : "requester \(error)")
                }
            }
            try c.join()               // returns only if the cancellation took effect without the gate
            log.append("requester ended")
            _ = gate.fulfill(())
            log.append("next request \(try actor.request(2))")
            return log.all
        }
        #expect(log == ["actor cancelled the requester", "requester cancelled", "requester ended",
                        "actor answers 1", "next request 20"])
    }

    @Test("an actor whose body ends while a requester waits directly resumes it with the reply, noReply for a dropped envelope, or the body's error; later requests throw terminated")
    func bodyEndsWhileARequesterWaits() async throws {
        let outcomes = try await Kit.run { () -> [String] in
            func outcome(_ body: () throws -> Int) -> String {
                do { return "replied \(try body())" } catch { return "\(error)" }
            }
            let replies = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    envelope.reply(5)
                    break
                }
            }
            let drops = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    _ = Kit.opaque(envelope.message)
                    break
                }
            }
            let throwsError = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    _ = Kit.opaque(envelope.message)
                    throw Refused()
                }
            }
            try Coroutine.yield()   // the three actors start and wait for their first message
            var results: [String] = []
            for actor in [replies, drops, throwsError] {
                results.append(outcome { try actor.request(1) })
                results.append(outcome { try actor.request(2) })
            }
            return results
        }
        #expect(outcomes == ["replied 5", "\(ActorError.terminated)",
                             "\(ActorError.noReply)", "\(ActorError.terminated)",
                             "\(Refused())", "\(ActorError.terminated)"])
    }

    @Test("the message of a direct request is released by the actor's next iteration, before its requester resumes")
    func directRequestReleasesItsMessage() async throws {
        let releasedAfterEach = try await Kit.run { () -> [Int] in
            let released = Kit.Counter()
            let actor = CoroutineActor<Kit.Tracker, Int>(on: CoroutineScheduler.current) { mailbox in
                var handled = 0
                for envelope in mailbox {
                    handled += 1
                    envelope.reply(handled)
                }
            }
            defer { actor.cancel() }
            try Coroutine.yield()
            var counts: [Int] = []
            for _ in 0..<4 {
                _ = try actor.request(Kit.Tracker(released))
                counts.append(released.value)
            }
            return counts
        }
        #expect(releasedAfterEach == [1, 2, 3, 4])
    }

    /// A weak reference to an envelope, as a registry of pending work would keep.
    final class WeakEnvelope: @unchecked Sendable {
        weak var envelope: Envelope<Pending, Int>?
        init(_ e: Envelope<Pending, Int>) { envelope = e }
    }

    enum Pending: Sendable { case work(Int), failPending }

    @Test("an envelope the actor references only weakly is gone after the next iteration, and never stands for a later request")
    func weakReferenceNeverSeesALaterRequest() async throws {
        let outcome = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Pending, Int>(on: CoroutineScheduler.current) { mailbox in
                var pending: [WeakEnvelope] = []   // weak: an answered envelope is not kept alive
                for envelope in mailbox {
                    switch envelope.message {
                    case .work(let n):
                        pending.append(WeakEnvelope(envelope))
                        envelope.reply(n)
                    case .failPending:
                        // Fails every envelope still alive and unanswered: none, the earlier ones
                        // were answered and released.
                        var failed = 0
                        for w in pending {
                            if let e = w.envelope, !e.isAnswered { e.fail(Refused()); failed += 1 }
                        }
                        pending.removeAll()
                        envelope.reply(failed)
                    }
                }
            }
            defer { actor.cancel() }
            var outcome: [String] = []
            _ = try actor.request(.failPending)   // the actor now waits for its next message
            outcome.append("work -> \(try actor.request(.work(7)))")
            do {
                outcome.append("failPending -> \(try actor.request(.failPending))")
            } catch {
                outcome.append("failPending threw \(error)")
            }
            return outcome
        }
        #expect(outcome == ["work -> 7", "failPending -> 0"])
    }

    @Test("a requester waiting on an actor that waits directly on another actor, which suspends, is cancelled at once, and both actors go on answering")
    func cancelledThroughANestedDirectRequest() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let handling = Promise<Void>()
            let gate = Promise<Void>()
            let inner = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 {
                        _ = handling.fulfill(())
                        try gate.await()
                    }
                    envelope.reply(envelope.message + 100)
                }
            }
            let outer = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    envelope.reply(try inner.request(envelope.message))
                }
            }
            defer { outer.cancel(); inner.cancel() }
            try Coroutine.yield()   // both actors wait for their first message
            let requester = Coroutine.launch {
                do {
                    _ = try outer.request(1)
                    log.append("requester replied")
                } catch {
                    log.append(error is CancellationError ? "requester cancelled" : "requester \(error)")
                }
            }
            try handling.await()   // the inner actor holds the request; the outer waits on it
            requester.cancel()
            try requester.join()
            log.append("requester ended")
            _ = gate.fulfill(())
            log.append("next request \(try outer.request(2))")
            return log.all
        }
        #expect(log == ["requester cancelled", "requester ended", "next request 102"])
    }

    @Test("an envelope the actor keeps is answered later from a plain thread; its direct requester, given up when the actor moved on, gets that answer")
    func keptEnvelopeAnsweredFromAnotherThread() async throws {
        let replies = try await Kit.run { () -> [Int] in
            let kept = Kit.Box<[Envelope<Int, Int>]>([])
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    kept.value.append(envelope)
                    let answer = envelope.message * 7
                    Thread { kept.value.first { $0.message == envelope.message }?.reply(answer) }.start()
                }
            }
            defer { actor.cancel() }
            try Coroutine.yield()
            return try (1...20).map { try actor.request($0) }
        }
        #expect(replies == (1...20).map { $0 * 7 })
    }
}
