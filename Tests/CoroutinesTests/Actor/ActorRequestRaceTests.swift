import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// `CoroutineActor.request` against the races of its answer: cancellation and timeouts meeting
/// the reply from another thread, envelopes answered off the actor, actors on pools and chains of
/// actors, generators, and schedulers that stop while requests wait.
@Suite("Actor request races")
struct ActorRequestRaceTests {
    /// An actor that replies to each message with the message itself.
    static func makeEcho(on scheduler: CoroutineScheduler? = nil) -> CoroutineActor<Int, Int> {
        CoroutineActor<Int, Int>(on: scheduler) { mailbox in
            for envelope in mailbox { envelope.reply(envelope.message) }
        }
    }

    /// An echo actor that first spins for a time that grows with the message, so that a requester
    /// cancelled at a varying point meets the actor at every step of its handling.
    static func makeJitteredEcho(on scheduler: CoroutineScheduler) -> CoroutineActor<Int, Int> {
        CoroutineActor<Int, Int>(on: scheduler) { mailbox in
            for envelope in mailbox {
                jitter(max(0, envelope.message))
                envelope.reply(envelope.message)
            }
        }
    }

    @Test("a requester cancelled from another thread while an actor on another scheduler answers gets either its own answer or CancellationError, and the next coroutine on its stack never sees the dropped answer")
    func cancellationRacesTheReply() async throws {
        try await Kit.withScheduler("race-actor") { actorScheduler in
            try await Kit.withScheduler("race-requester") { requesterScheduler in
                let actor = Self.makeJitteredEcho(on: actorScheduler)
                defer { actor.cancel() }
                var answered = 0, cancelled = 0
                for round in 1...400 {
                    // Given a requester waiting for the echo of `round`
                    let requester = Coroutine.async(on: requesterScheduler) { () -> Int in
                        let reply = try actor.request(round)
                        scribble(round)   // reuses the frame the answer went to
                        return reply
                    }
                    // When it is cancelled at a varying point of the actor's handling
                    jitter(round &* 7)
                    requester.cancel()
                    // Then it gets its own answer, or CancellationError
                    do {
                        let reply = try await requester.value
                        #expect(reply == round, "round \(round) got the answer \(reply)")
                        answered += 1
                    } catch is CancellationError {
                        cancelled += 1
                    }
                }
                // And the actor handled every message; a fresh request is answered
                let last = try await Coroutine.async(on: requesterScheduler) { try actor.request(-1) }.value
                #expect(last == -1)
                #expect(answered + cancelled == 400)
            }
        }
    }

    @Test("a coroutine whose requests keep timing out as the reply arrives gets each later request's own answer, never an earlier dropped one")
    func timeoutsRaceTheReplyInOneFrame() async throws {
        try await Kit.withScheduler("timeout-actor") { actorScheduler in
            let actor = CoroutineActor<Int, Int>(on: actorScheduler) { mailbox in
                for envelope in mailbox {
                    spin(microseconds: envelope.message % 40)
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            let (wrong, answered) = try await Kit.run { () -> ([String], Int) in
                var wrong: [String] = [], answered = 0
                for i in 1...600 {
                    // Given requests at the same depth (the same slot address) of one coroutine,
                    // the earlier ones timed out with their answer still on its way
                    do {
                        let reply = try Coroutine.withTimeout(.microseconds(i % 30)) { try actor.request(i) }
                        if reply != i { wrong.append("request \(i) answered \(reply)") }
                        answered += 1
                    } catch CoroutineError.timedOut {
                        continue
                    }
                }
                // When a request without a timeout follows
                let reply = try actor.request(1_000_000)
                if reply != 1_000_000 { wrong.append("the last request answered \(reply)") }
                return (wrong, answered)
            }
            // Then every answer received is the request's own
            #expect(wrong.isEmpty, "\(wrong.prefix(5))")
            _ = answered
        }
    }

    @Test("an actor that hands its envelopes to plain threads and other schedulers answers every requester on several schedulers with its own reply")
    func envelopesAnsweredOffTheActor() async throws {
        try await Kit.withScheduler("off-a") { a in
            try await Kit.withScheduler("off-b") { b in
                // Given an actor that answers half of its envelopes from a plain thread and the
                // other half from a coroutine on another scheduler, after it moved on
                let actor = CoroutineActor<Int, Int>(on: a) { mailbox in
                    for envelope in mailbox {
                        if envelope.message % 2 == 0 {
                            Thread { envelope.reply(envelope.message * 2) }.start()
                        } else {
                            Coroutine.launch(on: b) { try Coroutine.yield(); envelope.reply(envelope.message * 2) }
                        }
                    }
                }
                defer { actor.cancel() }
                // When 40 coroutines on the actor's scheduler and on the other make 25 requests each
                let requesters = (0..<40).map { r in
                    Coroutine.async(on: r % 2 == 0 ? a : b) { () -> [String] in
                        var wrong: [String] = []
                        for k in 0..<25 {
                            let m = r * 1_000 + k
                            let reply = try actor.request(m)
                            if reply != m * 2 { wrong.append("\(m) -> \(reply)") }
                        }
                        return wrong
                    }
                }
                // Then each gets its own replies
                for requester in requesters {
                    let wrong = try await requester.value
                    #expect(wrong.isEmpty, "\(wrong.prefix(5))")
                }
            }
        }
    }

    @Test("an actor on a pool answers requests from coroutines on the pool and on another scheduler")
    func poolActor() async throws {
        let pool = SchedulerPool(name: "request-pool", count: 2)!
        defer { pool.stop() }
        try await Kit.withScheduler("pool-requester") { s in
            let total = Kit.Counter()
            let actor = CoroutineActor<Int, Int>(on: pool) { mailbox in
                for envelope in mailbox {
                    _ = total.increment()
                    envelope.reply(envelope.message + 1)
                }
            }
            defer { actor.cancel() }
            let onPool = (0..<20).map { r in
                Coroutine.async(on: pool) { try (0..<50).allSatisfy { try actor.request(r * 100 + $0) == r * 100 + $0 + 1 } }
            }
            let onScheduler = (0..<20).map { r in
                Coroutine.async(on: s) { try (0..<50).allSatisfy { try actor.request(-r * 100 - $0) == -r * 100 - $0 + 1 } }
            }
            for c in onPool + onScheduler {
                let allOwn = try await c.value
                #expect(allOwn)
            }
            #expect(total.value == 2_000)
        }
    }

    @Test("an actor whose handler requests another actor, on the same scheduler and on another, answers through the chain")
    func chainOfActors() async throws {
        try await Kit.withScheduler("chain-other") { other in
            let replies = try await Kit.run { () -> [Int] in
                let here = CoroutineScheduler.current
                let c = Self.makeEcho(on: other)
                let b = CoroutineActor<Int, Int>(on: here) { mailbox in
                    for envelope in mailbox { envelope.reply(try c.request(envelope.message) * 10) }
                }
                let a = CoroutineActor<Int, Int>(on: here) { mailbox in
                    for envelope in mailbox { envelope.reply(try b.request(envelope.message) + 1) }
                }
                defer { a.cancel(); b.cancel(); c.cancel() }
                // Given another coroutine queued on the same scheduler, requesting too
                let side = Coroutine.async { try (1...50).map { try b.request($0) } }
                let mine = try (1...50).map { try a.request($0) }
                #expect(try side.await() == (1...50).map { $0 * 10 })
                return mine
            }
            #expect(replies == (1...50).map { $0 * 10 + 1 })
        }
    }

    @Test("a generator's body that requests an actor yields the replies to its consumer coroutine")
    func generatorBodyRequests() async throws {
        let values = try await Kit.run { () -> [Int] in
            let actor = Self.makeEcho(on: CoroutineScheduler.current)
            defer { actor.cancel() }
            let g = Generator<Int> { yield in
                for i in 1...100 { try yield(try actor.request(i)) }
            }
            var values: [Int] = []
            while let v = g.next() { values.append(v) }
            return values
        }
        #expect(values == Array(1...100))
    }

    @Test("when the actor's scheduler stops with requests queued, every requester gets an error, none hangs")
    func actorSchedulerStops() async throws {
        let actorScheduler = CoroutineScheduler(name: "stopping-actor")
        defer { actorScheduler.stop() }
        try await Kit.withScheduler("stopping-requesters") { s in
            let handling = Promise<Void>()
            let never = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: actorScheduler) { mailbox in
                for envelope in mailbox {
                    handling.fulfill(())
                    try never.await()
                    envelope.reply(envelope.message)
                }
            }
            // Given a busy actor and 20 requests queued behind the one it handles
            let requesters = (0..<21).map { i in Coroutine.async(on: s) { try actor.request(i) } }
            try await handling.value
            #expect(await Kit.eventually { actor.mailbox.count == 20 })
            // When its scheduler stops
            actorScheduler.stop()
            // Then every requester throws (the one in hand with the body's error, the queued ones
            // terminated)
            var errors: [String] = []
            for r in requesters {
                do { _ = try await r.value; errors.append("replied") } catch { errors.append("\(error)") }
            }
            #expect(!errors.contains("replied"))
            #expect(errors.filter { $0 == "\(ActorError.terminated)" }.count >= 20, "\(errors)")
        }
    }

    @Test("a requester whose own scheduler stops while it waits throws CancellationError, and the actor answers the next requester")
    func requesterSchedulerStops() async throws {
        try await Kit.withScheduler("stop-actor") { actorScheduler in
            let release = Promise<Void>()
            let handling = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: actorScheduler) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 0 { handling.fulfill(()); try release.await() }
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            let requesterScheduler = CoroutineScheduler(name: "stop-requester")
            // Given requesters waiting on a busy actor, one being handled and the others queued
            let requesters = (0..<10).map { i in Coroutine.async(on: requesterScheduler) { try actor.request(i) } }
            try await handling.value
            #expect(await Kit.eventually { actor.mailbox.count == 9 })
            // When their scheduler stops, then the actor answers them
            requesterScheduler.stop()
            for r in requesters {
                await #expect(throws: CancellationError.self) { try await r.value }
            }
            release.fulfill(())
            // Then the dropped answers went nowhere, and a new requester gets its own
            #expect(try await Coroutine.async(on: actorScheduler) { try actor.request(42) }.value == 42)
        }
    }

    @Test("a requester already cancelled when it requests throws CancellationError and its message is never sent")
    func cancelledBeforeRequesting() async throws {
        let handled = Kit.Log<Int>()
        let outcome = try await Kit.run { () -> String in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    handled.append(envelope.message)
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)   // the actor is idle: a request would be a hand-off
            // Given a requester that is cancelled (by itself) when it is about to request
            let requester = Coroutine.async { () -> Int in
                Coroutine.current?.cancel()
                return try actor.request(1)
            }
            // When it runs, then it throws
            let outcome: String
            do { _ = try requester.await(); outcome = "replied" } catch { outcome = "\(type(of: error))" }
            // And the actor never got its message
            _ = try actor.request(2)
            return outcome
        }
        #expect(outcome == "CancellationError")
        #expect(handled.all == [0, 2])
    }

    @Test("an envelope released unanswered on a plain thread after the actor moved on answers its requester noReply")
    func droppedOffTheActor() async throws {
        let outcomes = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    // Handed to a thread that drops it; the actor waits for its next message
                    Thread { _ = Kit.opaque(envelope.message) }.start()
                }
            }
            defer { actor.cancel() }
            return (0..<20).map { i in
                do { return "replied \(try actor.request(i))" } catch { return "\(error)" }
            }
        }
        #expect(outcomes == Array(repeating: "\(ActorError.noReply)", count: 20))
    }

    @Test("50 requesters on the actor's own scheduler, with other coroutines queued, each get their own answers, and the actor sees each requester's messages in order")
    func manyRequestersOnTheActorsScheduler() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let seen = Kit.Log<Int>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    seen.append(envelope.message)
                    envelope.reply(envelope.message &* 3)
                }
            }
            defer { actor.cancel() }
            let others = Kit.Counter()
            // Given 50 requesters and 50 coroutines that only yield, on one scheduler
            let busy = (0..<50).map { _ in Coroutine.launch { for _ in 0..<100 { try Coroutine.yield(); _ = others.increment() } } }
            let requesters = (0..<50).map { r in
                Coroutine.async { () -> [String] in
                    var wrong: [String] = []
                    for k in 0..<100 {
                        let m = r * 1_000 + k
                        let reply = try actor.request(m)
                        if reply != m * 3 { wrong.append("\(m) -> \(reply)") }
                    }
                    return wrong
                }
            }
            // When all of them have run
            var wrong = try requesters.flatMap { try $0.await() }
            for b in busy { try b.join() }
            // Then each requester's messages reached the actor in the order it sent them
            let all = seen.all
            for r in 0..<50 where all.filter({ $0 / 1_000 == r }) != (0..<100).map({ r * 1_000 + $0 }) {
                wrong.append("requester \(r) out of order")
            }
            if others.value != 5_000 { wrong.append("the yielding coroutines ran \(others.value) turns") }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    @Test("sends from plain threads racing with hand-off requests on the actor's scheduler: every message is answered, and each sender's messages reach the actor in the order it sent them")
    func plainThreadSendsRaceHandOffs() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let seen = Kit.Log<Int>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    seen.append(envelope.message)
                    envelope.reply(envelope.message &+ 1)
                }
            }
            defer { actor.cancel() }
            // Given 4 plain threads that each send 2,000 messages while the actor parks and wakes
            let threads = 4, perThread = 2_000
            let sent = WaitGroup()
            let replies = Mutex<[Promise<Int>]>([])
            sent.add(threads)
            for t in 1...threads {
                Thread.detachNewThread {
                    var mine: [Promise<Int>] = []
                    for k in 0..<perThread { mine.append(actor.send(t * 100_000 + k)) }
                    replies.locked { $0 += mine }
                    sent.done()
                }
            }
            // And a requester on the actor's scheduler handing off 2,000 requests meanwhile
            var wrong: [String] = []
            for k in 0..<2_000 {
                let reply = try actor.request(k)
                if reply != k + 1 { wrong.append("request \(k) -> \(reply)") }
            }
            try sent.wait()
            // Then every send is answered (a lost wake-up would leave the actor parked for ever)
            for promise in replies.locked({ $0 }) { _ = try promise.await() }
            let all = seen.all
            #expect(all.count == threads * perThread + 2_000)
            for t in 0...threads {
                let base = t * 100_000, count = t == 0 ? 2_000 : perThread
                if all.filter({ $0 / 100_000 == t }) != (0..<count).map({ base + $0 }) { wrong.append("sender \(t) out of order") }
            }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }
}
