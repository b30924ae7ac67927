import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// An actor that answered a direct request parks without arming its wait, owned by its thread,
/// until the next direct request from that thread takes it or the loop gets the thread back and
/// arms it (`Mailbox.swift` invariant 12, <doc:Actors>).
@Suite("Actor parked unarmed, owned by its thread")
struct ActorParkedUnarmedTests {
    /// Spins, holding the thread, until `condition` holds; records a hang past ``hangBound``.
    static func holdThread(until condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) {
        let start = ContinuousClock.now
        while !condition() {
            if ContinuousClock.now - start > hangBound {
                Issue.record("hang: the condition never held", sourceLocation: sourceLocation)
                return
            }
        }
    }

    /// Whether `actor`'s coroutine is the one parked unarmed on the current scheduler.
    static func isParkedUnarmed(_ actor: CoroutineActor<Int, Int>) -> Bool {
        let owned = CoroutineScheduler.current?.actorOwnedByThread?.toOpaque()
        return owned == Unmanaged.passUnretained(actor.coroutine).toOpaque()
            && actor.coroutine.epoch.load(ordering: .relaxed) & 1 == 0
    }

    /// A first request, which finds the new actor not yet waiting (the ordinary path): after it,
    /// the actor waits in its mailbox and the next request is direct. Its message, -1, is not
    /// logged by the actors here.
    static func warmUp(_ actor: CoroutineActor<Int, Int>) throws {
        _ = try actor.request(-1)
    }

    /// "request answered" or "request terminated" for a request of `message`; other errors throw.
    static func outcome(of actor: CoroutineActor<Int, Int>, _ message: Int) throws -> String {
        do {
            _ = try actor.request(message)
            return "request answered"
        } catch ActorError.terminated {
            return "request terminated"
        }
    }

    @Test("a plain thread's post to an actor parked unarmed only queues while the requester holds the thread; the loop then arms the actor, which handles it before the next request, in order")
    func postFromPlainThreadWhileParkedUnarmed() async throws {
        let (log, reply) = try await Kit.run { () -> ([String], Int) in
            let log = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message >= 0 { log.append("handled \(envelope.message)") }
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            try Self.warmUp(actor)
            _ = try actor.request(1)
            #expect(Self.isParkedUnarmed(actor))
            let posted = Atomic<Bool>(false)
            let promise = Kit.Box<Promise<Int>?>(nil)
            Thread.detachNewThread {
                promise.value = actor.send(2)
                posted.store(true, ordering: .releasing)
            }
            Self.holdThread(until: { posted.load(ordering: .acquiring) })
            // The post found the actor busy (its epoch even): nothing woke it.
            #expect(Self.isParkedUnarmed(actor))
            #expect(actor.mailbox.count == 1)
            log.append("post queued")
            // Something is queued: the ordinary path, through the loop, which arms the actor.
            log.append("replied \(try actor.request(3))")
            return (log.all, try promise.value!.await())
        }
        #expect(log == ["handled 1", "post queued", "handled 2", "handled 3", "replied 30"])
        #expect(reply == 20)
    }

    @Test("an actor parked unarmed and cancelled from a plain thread ends once its thread goes back to the loop; later requests get terminated")
    func cancelledFromPlainThreadWhileParkedUnarmed() async throws {
        let outcome = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message) }
                log.append("actor's loop ended")
            }
            try Self.warmUp(actor)
            _ = try actor.request(1)
            #expect(Self.isParkedUnarmed(actor))
            let cancelled = Atomic<Bool>(false)
            Thread.detachNewThread {
                actor.cancel()
                cancelled.store(true, ordering: .releasing)
            }
            Self.holdThread(until: { cancelled.load(ordering: .acquiring) })
            #expect(Self.isParkedUnarmed(actor))   // the cancellation found nothing to claim
            log.append("cancelled")
            try actor.coroutine.join()
            log.append(try Self.outcome(of: actor, 2))
            return log.all
        }
        #expect(outcome == ["cancelled", "actor's loop ended", "request terminated"])
    }

    @Test("a request right after its own coroutine cancelled the actor parked unarmed is not handed over: it gets terminated")
    func requestAfterSameThreadCancel() async throws {
        let outcome = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message >= 0 { log.append("handled \(envelope.message)") }
                    envelope.reply(envelope.message)
                }
            }
            try Self.warmUp(actor)
            _ = try actor.request(1)
            #expect(Self.isParkedUnarmed(actor))
            actor.cancel()
            log.append(try Self.outcome(of: actor, 2))
            return log.all
        }
        #expect(outcome == ["handled 1", "request terminated"])
    }

    @Test("an actor taken unarmed by a direct request names no mailbox wait: a post while its body then waits on a promise queues, and does not wake that wait")
    func takenUnarmedThenWaitingElsewhere() async throws {
        let (log, replies) = try await Kit.run { () -> ([String], [Int]) in
            let log = Kit.Log<String>()
            let gate = Promise<Void>()
            let this = Kit.Box<CoroutineActor<Int, Int>?>(nil)
            let posted = Kit.Box<Promise<Int>?>(nil)
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 2 {
                        // Taken unarmed: `parkedEpoch` must not name the wait armed next.
                        log.append("parkedEpoch \(mailbox.parkedEpoch.load(ordering: .relaxed))")
                        Thread.detachNewThread {
                            posted.value = this.value!.send(3)
                            _ = gate.fulfill(())
                        }
                        try gate.await()
                        log.append("passed the gate, \(mailbox.count) queued")
                    } else if envelope.message >= 0 {
                        log.append("handled \(envelope.message)")
                    }
                    envelope.reply(envelope.message * 10)
                }
            }
            this.value = actor
            defer { actor.cancel() }
            try Self.warmUp(actor)
            let first = try actor.request(1)
            #expect(Self.isParkedUnarmed(actor))
            let second = try actor.request(2)
            let third = try actor.request(4)
            return (log.all, [first, second, third, try posted.value!.await()])
        }
        #expect(log == ["handled 1", "parkedEpoch 0", "passed the gate, 1 queued", "handled 3", "handled 4"])
        #expect(replies == [10, 20, 40, 30])
    }

    @Test("two actors requested alternately on one scheduler: one is parked unarmed in the thread's slot, the other arms as usual; every request is answered in order")
    func twoActorsShareTheSlot() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let make = { (factor: Int) in
                CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox { envelope.reply(envelope.message * factor) }
                }
            }
            let a = make(2), b = make(3)
            defer { a.cancel(); b.cancel() }
            try Self.warmUp(a)
            try Self.warmUp(b)
            var wrong: [String] = []
            var sawOneUnarmedAndOneArmed = false
            for k in 0..<500 {
                if try a.request(k) != 2 * k { wrong.append("a \(k)") }
                if try b.request(k) != 3 * k { wrong.append("b \(k)") }
                let armed = [a, b].filter { $0.coroutine.epoch.load(ordering: .relaxed) & 1 == 1 }.count
                if Self.isParkedUnarmed(a) != Self.isParkedUnarmed(b), armed == 1 { sawOneUnarmedAndOneArmed = true }
            }
            if !sawOneUnarmedAndOneArmed { wrong.append("never one parked unarmed and the other armed") }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }
}
