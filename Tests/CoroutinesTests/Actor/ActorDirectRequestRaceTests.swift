import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// The direct request (Mailbox.swift invariants 7-9, Envelope.swift states): a requester on the
/// actor's own scheduler waits unarmed while the actor handles its message, and is given up
/// (armed, cancellable) when the actor suspends, switches to another coroutine or ends.
@Suite("Actor direct requests under races")
struct ActorDirectRequestRaceTests {
    struct Refused: Error, Equatable {}

    /// How the handler suspends before it answers.
    enum Pause: String, CaseIterable, Sendable {
        case yield, delay, promise, channel, join, directRequest
    }

    /// Suspends the calling coroutine (the actor's) once, in the way `pause` names; `other` is an
    /// idle echo actor on the same scheduler, for `directRequest`.
    static func suspend(_ pause: Pause, other: CoroutineActor<Int, Int>) throws {
        switch pause {
        case .yield:
            try Coroutine.yield()
        case .delay:
            try Coroutine.delay(.microseconds(50))
        case .promise:
            let p = Promise<Void>()
            Coroutine.launch { p.fulfill(()) }
            try p.await()
        case .channel:
            let c = Channel<Int>()
            Coroutine.launch { try c.send(1) }
            _ = try c.receive()
        case .join:
            try Coroutine.launch { try Coroutine.yield() }.join()
        case .directRequest:
            _ = try other.request(5)
        }
    }

    static func makeEcho(on scheduler: CoroutineScheduler?) -> CoroutineActor<Int, Int> {
        CoroutineActor<Int, Int>(on: scheduler) { mailbox in
            for envelope in mailbox { envelope.reply(envelope.message) }
        }
    }

    /// An actor on the current scheduler that echoes each message and logs "actor answers N"
    /// first; message 1 it handles by suspending (`pause`, through `other`), fulfilling
    /// `handling`, then waiting for `gate`.
    fileprivate static func makeGatedActor(_ pause: Pause, other: CoroutineActor<Int, Int>, handling: Promise<Void>? = nil,
                               gate: Promise<Void>, log: Kit.Log<String>) -> CoroutineActor<Int, Int> {
        CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
            for envelope in mailbox {
                if envelope.message == 1 {
                    try Self.suspend(pause, other: other)   // a direct requester is given up here
                    handling?.fulfill(())
                    try gate.await()
                }
                log.append("actor answers \(envelope.message)")
                envelope.reply(envelope.message)
            }
        }
    }

    // MARK: Cancellation of a direct requester

    @Test("a direct requester the actor cancels while handling its message without suspending gets the answer (<doc:Actors>, Mailbox invariant 8), and sees the cancellation at its next suspension")
    func cancelledWhileActorRunsUnsuspended() async throws {
        let outcome = try await Kit.run { () -> [String] in
            let requester = Kit.Box<Coroutine?>(nil)
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 { requester.value?.cancel() }
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)   // idle from now on
            let r = Coroutine.async { () -> [String] in
                requester.value = Coroutine.current
                var log = ["reply \(try actor.request(1))"]
                do { try Coroutine.yield(); log.append("yield returned") } catch { log.append("yield threw \(type(of: error))") }
                return log
            }
            var log = try r.await()
            log.append("next reply \(try actor.request(2))")
            return log
        }
        #expect(outcome == ["reply 10", "yield threw CancellationError", "next reply 20"])
    }

    @Test("a direct requester cancelled by the actor, which then suspends before answering, throws CancellationError; the answer is dropped and the actor goes on", arguments: Pause.allCases)
    func cancelledThenActorSuspends(_ pause: Pause) async throws {
        let handled = Kit.Log<String>()
        let outcome = try await Kit.run { () -> [String] in
            let requester = Kit.Box<Coroutine?>(nil)
            let other = Self.makeEcho(on: CoroutineScheduler.current)
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 {
                        requester.value?.cancel()
                        try Self.suspend(pause, other: other)
                    }
                    handled.append("answered \(envelope.message)")
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel(); other.cancel() }
            _ = try other.request(0)
            _ = try actor.request(0)
            let r = Coroutine.async { () -> Int in
                requester.value = Coroutine.current
                let reply = try actor.request(1)
                scribble(reply)
                return reply
            }
            var log: [String]
            do { log = ["replied \(try r.await())"] } catch { log = ["threw \(type(of: error))"] }
            scribble(7)
            log.append("next reply \(try actor.request(2))")
            return log
        }
        #expect(outcome == ["threw CancellationError", "next reply 20"])
        #expect(handled.all == ["answered 0", "answered 1", "answered 2"])
    }

    @Test("a direct requester cancelled by another coroutine while the actor is suspended in its handling throws CancellationError at once; the actor's later answer is dropped", arguments: Pause.allCases)
    func cancelledWhileActorSuspended(_ pause: Pause) async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            let handling = Promise<Void>()
            let gate = Promise<Void>()
            let other = Self.makeEcho(on: CoroutineScheduler.current)
            let actor = Self.makeGatedActor(pause, other: other, handling: handling, gate: gate, log: log)
            defer { actor.cancel(); other.cancel() }
            _ = try other.request(0)
            _ = try actor.request(0)
            let r = Coroutine.launch {
                do { _ = try actor.request(1); log.append("requester replied") } catch { log.append("requester threw \(type(of: error))") }
            }
            try handling.await()
            r.cancel()
            try r.join()
            gate.fulfill(())
            scribble(3)
            log.append("next \(try actor.request(2))")
        }
        #expect(log.all == ["actor answers 0", "requester threw CancellationError", "actor answers 1", "actor answers 2", "next 2"])
    }

    @Test("direct requesters cancelled from a plain thread while the actor hands their envelopes to plain threads (reply, drop, or reply after the actor suspended): each gets its own answer, noReply or CancellationError")
    func cancellationRacesOffThreadAnswers() async throws {
        try await Kit.withScheduler("direct-cancel-race") { s in
            // Mode by message % 4: 0 reply on a thread while the actor moves on without
            // suspending; 1 the same, the actor yields first; 2 dropped on a thread; 3 kept by
            // the actor too and replied on a thread, the actor spinning a little.
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                var kept: [Envelope<Int, Int>] = []
                for envelope in mailbox {
                    let m = envelope.message
                    if m < 0 { envelope.reply(m); continue }
                    switch m % 4 {
                    case 0:
                        Thread { jitter(m &* 3); envelope.reply(m * 2) }.start()
                        jitter(m &* 5)
                    case 1:
                        Thread { jitter(m &* 3); envelope.reply(m * 2) }.start()
                        try Coroutine.yield()
                    case 2:
                        Thread { jitter(m &* 3); _ = Kit.opaque(envelope) }.start()
                        jitter(m &* 5)
                    default:
                        kept.append(envelope)
                        if kept.count > 3 { kept.removeFirst() }
                        Thread { jitter(m &* 3); envelope.reply(m * 2) }.start()
                        jitter(m &* 7)
                    }
                }
            }
            defer { actor.cancel() }
            _ = try await Coroutine.async(on: s) { try actor.request(-1) }.value
            var wrong: [String] = []
            var outcomes = [String: Int]()
            for round in 0..<400 {
                let outcome = Kit.Box("none")
                let started = Kit.Box(false)
                let requester = Coroutine.launch(on: s) {
                    started.value = true
                    do {
                        let reply = try actor.request(round)
                        outcome.value = reply == round * 2 ? "replied" : "wrong \(reply)"
                        scribble(round)
                    } catch is CancellationError {
                        outcome.value = "cancelled"
                    } catch ActorError.noReply {
                        outcome.value = round % 4 == 2 ? "noReply" : "wrong noReply"
                    }
                }
                try await Kit.onPlainThread {
                    while !started.value { sched_yield() }   // the requester is about to request
                    jitter(round &* 11)
                    requester.cancel()
                }
                try await requester.join()
                if outcome.value.hasPrefix("wrong") { wrong.append("\(round): \(outcome.value)") }
                outcomes[outcome.value, default: 0] += 1
            }
            #expect(outcomes["replied", default: 0] > 0 && outcomes["cancelled", default: 0] > 0, "\(outcomes)")
            let last = try await Coroutine.async(on: s) { try actor.request(-5) }.value
            #expect(last == -5)
            #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        }
    }

    // MARK: Timeouts

    @Test("withTimeout around a direct request whose actor suspends while handling: timedOut, the answer is dropped, the next request gets its own", arguments: Pause.allCases)
    func timeoutWhileActorSuspends(_ pause: Pause) async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            let gate = Promise<Void>()
            let other = Self.makeEcho(on: CoroutineScheduler.current)
            let actor = Self.makeGatedActor(pause, other: other, gate: gate, log: log)
            defer { actor.cancel(); other.cancel() }
            _ = try other.request(0)
            _ = try actor.request(0)
            do {
                let r = try Coroutine.withTimeout(.milliseconds(2)) { try actor.request(1) }
                log.append("replied \(r)")
            } catch CoroutineError.timedOut {
                log.append("timed out")
            }
            gate.fulfill(())
            scribble(5)
            log.append("next \(try actor.request(2))")
        }
        #expect(log.all == ["actor answers 0", "timed out", "actor answers 1", "actor answers 2", "next 2"])
    }

    @Test("direct requests in expiring withTimeout scopes of varying length while the actor delays: each answer received is the request's own")
    func timeoutsRaceDirectAnswers() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message % 3 == 0 { try Coroutine.delay(.microseconds(envelope.message % 50)) }
                    else if envelope.message % 3 == 1 { try Coroutine.yield() }
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(-3)
            var wrong: [String] = []
            for i in 1...600 {
                do {
                    let reply = try Coroutine.withTimeout(.microseconds(i % 40)) { try actor.request(i) }
                    if reply != i { wrong.append("\(i) -> \(reply)") }
                } catch CoroutineError.timedOut {}
            }
            let last = try actor.request(1_000_002)
            if last != 1_000_002 { wrong.append("last -> \(last)") }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    // MARK: Envelopes kept, handed away, answered twice

    enum Held: Sendable { case hold(Int), flush }

    @Test("envelopes the actor keeps in an array are answered by a later message, or dropped then (noReply), while their direct requesters wait")
    func keptEnvelopesAnsweredLater() async throws {
        let outcome = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Held, Int>(on: CoroutineScheduler.current) { mailbox in
                var held: [Envelope<Held, Int>] = []
                for envelope in mailbox {
                    switch envelope.message {
                    case .hold: held.append(envelope)
                    case .flush:
                        // the first held is answered, the others dropped
                        var answered = 0
                        for (i, e) in held.enumerated() where i == 0 {
                            if case .hold(let n) = e.message { e.reply(n * 100); answered += 1 }
                        }
                        held.removeAll()
                        envelope.reply(answered)
                    }
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(.flush)
            let r1 = Coroutine.async { try actor.request(.hold(1)) }
            let r2 = Coroutine.async { try actor.request(.hold(2)) }
            try Coroutine.yield()   // both hand their messages over and wait
            let flushed = try actor.request(.flush)
            var out = ["flush \(flushed)"]
            for r in [r1, r2] {
                do { out.append("reply \(try r.await())") } catch { out.append("\(error)") }
            }
            return out
        }
        #expect(outcome == ["flush 1", "reply 100", "\(ActorError.noReply)"])
    }

    @Test("two plain threads answer one direct envelope at once while the actor moves on or yields: the requester gets one of the two answers, always its own request's")
    func twoAnswersRace() async throws {
        try await Kit.withScheduler("direct-two-answers") { s in
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    let m = envelope.message
                    if m < 0 { envelope.reply(m); continue }
                    Thread { jitter(m); envelope.reply(m * 10 + 1) }.start()
                    Thread { jitter(m &* 3); envelope.fail(Kit.NumberedBoom(n: m * 10 + 2)) }.start()
                    if m % 2 == 1 { try Coroutine.yield() } else { jitter(m &* 7) }
                }
            }
            defer { actor.cancel() }
            let wrong = try await Coroutine.async(on: s) { () -> [String] in
                _ = try actor.request(-1)
                var wrong: [String] = []
                for m in 0..<500 {
                    do {
                        let r = try actor.request(m)
                        if r != m * 10 + 1 { wrong.append("\(m) -> \(r)") }
                    } catch let e as Kit.NumberedBoom {
                        if e.n != m * 10 + 2 { wrong.append("\(m) -> boom \(e.n)") }
                    }
                    scribble(m)
                }
                return wrong
            }.value
            #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        }
    }

    @Test("an actor answering direct requests from coroutines on another scheduler, after it moved on: each requester gets its own reply")
    func answeredFromAnotherScheduler() async throws {
        try await Kit.withScheduler("direct-answerer") { other in
            let wrong = try await Kit.run { () -> [String] in
                let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox {
                        let m = envelope.message
                        Coroutine.launch(on: other) {
                            if m % 2 == 0 { try Coroutine.yield() }
                            envelope.reply(m + 1)
                        }
                        if m % 3 == 0 { jitter(m) }
                    }
                }
                defer { actor.cancel() }
                let rs = (0..<8).map { r in
                    Coroutine.async { () -> [String] in
                        var wrong: [String] = []
                        for k in 0..<100 {
                            let m = r * 1_000 + k
                            let reply = try actor.request(m)
                            if reply != m + 1 { wrong.append("\(m) -> \(reply)") }
                        }
                        return wrong
                    }
                }
                return try rs.flatMap { try $0.await() }
            }
            #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        }
    }

    // MARK: Nested direct requests, chains, cycles

    @Test("a chain of 4 actors on one scheduler, each handling by requesting the next, the last suspending: replies flow back in order", arguments: Pause.allCases)
    func chainWithSuspendingTail(_ pause: Pause) async throws {
        let log = Kit.Log<String>()
        let replies = try await Kit.run { () -> [Int] in
            let here = CoroutineScheduler.current
            let other = Self.makeEcho(on: here)
            let tail = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox {
                    log.append("d \(envelope.message)")
                    if envelope.message > 0 { try Self.suspend(pause, other: other) }
                    envelope.reply(envelope.message + 1)
                }
            }
            func link(_ name: String, _ next: CoroutineActor<Int, Int>) -> CoroutineActor<Int, Int> {
                CoroutineActor<Int, Int>(on: here) { mailbox in
                    for envelope in mailbox {
                        log.append("\(name) \(envelope.message)")
                        let r = try next.request(envelope.message)
                        log.append("\(name) got \(r)")
                        envelope.reply(r * 2)
                    }
                }
            }
            let c = link("c", tail), b = link("b", c), a = link("a", b)
            defer { a.cancel(); b.cancel(); c.cancel(); tail.cancel(); other.cancel() }
            _ = try other.request(0)
            _ = try a.request(0)
            log.append("--")
            return try (1...3).map { try a.request($0) }
        }
        #expect(replies == (1...3).map { ($0 + 1) * 8 })
        let after = Array(log.all.drop { $0 != "--" }.dropFirst())
        let expected = (1...3).flatMap { m in
            ["a \(m)", "b \(m)", "c \(m)", "d \(m)", "c got \(m + 1)", "b got \((m + 1) * 2)", "a got \((m + 1) * 4)"]
        }
        #expect(after == expected)
    }

    @Test("a requester cancelled while a chain of direct requests it started is suspended at its tail throws CancellationError; the chain still completes and answers the next request")
    func cancelledDuringChain() async throws {
        let outcome = try await Kit.run { () -> [String] in
            let here = CoroutineScheduler.current
            let atTail = Promise<Void>()
            let gate = Promise<Void>()
            let tail = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 { atTail.fulfill(()); try gate.await() }
                    envelope.reply(envelope.message)
                }
            }
            let mid = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox { envelope.reply(try tail.request(envelope.message) + 10) }
            }
            let head = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox { envelope.reply(try mid.request(envelope.message) + 100) }
            }
            defer { head.cancel(); mid.cancel(); tail.cancel() }
            _ = try head.request(0)
            let result = Kit.Box("none")
            let r = Coroutine.launch {
                do { result.value = "replied \(try head.request(1))" } catch { result.value = "threw \(type(of: error))" }
            }
            try atTail.await()
            r.cancel()
            try r.join()
            var out = [result.value]
            gate.fulfill(())
            out.append("next \(try head.request(2))")
            return out
        }
        #expect(outcome == ["threw CancellationError", "next 112"])
    }

    @Test("actors on one scheduler requesting each other in a cycle deadlock; cancelling either actor ends the deadlock with errors, and everything finishes", arguments: [true, false])
    func cycleEndsByCancellation(_ cancelFirst: Bool) async throws {
        let outcome = try await Kit.run { () -> [String] in
            let here = CoroutineScheduler.current
            let bAsks = Promise<Void>()
            let box = Kit.Box<CoroutineActor<Int, Int>?>(nil)
            let b = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 0 { envelope.reply(0); continue }
                    bAsks.fulfill(())
                    do { envelope.reply(try box.value!.request(envelope.message)) } catch { envelope.fail(error) }
                }
            }
            let a = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 0 { envelope.reply(0); continue }
                    do { envelope.reply(try b.request(envelope.message)) } catch { envelope.fail(error) }
                }
            }
            box.value = a
            defer { a.cancel(); b.cancel(); box.value = nil }
            _ = try a.request(0)
            _ = try b.request(0)
            let r = Coroutine.async { try a.request(1) }
            try bAsks.await()          // a waits for b, b's request waits in a's mailbox
            try Coroutine.yield()
            if cancelFirst { a.cancel() } else { b.cancel() }
            var out: [String] = []
            do { out.append("replied \(try r.await())") } catch { out.append("threw") }
            do { out.append("then \(try a.request(3))") } catch { out.append("then threw") }
            a.cancel(); b.cancel()
            try? a.coroutine.join()
            try? b.coroutine.join()
            out.append("ended")
            return out
        }
        #expect(outcome == ["threw", "then threw", "ended"])
    }

    // MARK: The body ends while a requester waits directly

    enum Ending: String, CaseIterable, Sendable {
        case returnUnanswered, throwUnanswered, cancelSelfThenReply, returnAfterReply, returnKeepingEnvelope
    }

    @Test("the actor's body ends while a direct requester waits: the requester gets the answer the contract names, later requests terminated", arguments: Ending.allCases)
    func bodyEndsWhileRequesterWaits(_ ending: Ending) async throws {
        let outcome = try await Kit.run { () -> [String] in
            let keeper = Kit.Box<[Envelope<Int, Int>]>([])
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 0 { envelope.reply(0); continue }
                    switch ending {
                    case .returnUnanswered: return
                    case .throwUnanswered: throw Refused()
                    case .cancelSelfThenReply: Coroutine.current?.cancel(); envelope.reply(1)
                    case .returnAfterReply: envelope.reply(1); return
                    case .returnKeepingEnvelope:
                        keeper.value = [envelope]
                        Thread { Kit.opaque(envelope).reply(1) }.start()
                        return
                    }
                }
            }
            _ = try actor.request(0)
            var out: [String] = []
            do { out.append("reply \(try actor.request(1))") } catch { out.append("\(error)") }
            do { out.append("reply \(try actor.request(2))") } catch { out.append("\(error)") }
            try? actor.coroutine.join()
            keeper.value = []
            return out
        }
        let expected: [Ending: String] = [
            .returnUnanswered: "\(ActorError.noReply)", .throwUnanswered: "\(Refused())",
            .cancelSelfThenReply: "reply 1", .returnAfterReply: "reply 1", .returnKeepingEnvelope: "reply 1",
        ]
        #expect(outcome == [expected[ending]!, "\(ActorError.terminated)"])
    }

    @Test("an actor cancelled from another thread while it handles a direct request without suspending still answers it; later requests are terminated")
    func actorCancelledWhileHandling() async throws {
        try await Kit.withScheduler("direct-actor-cancelled") { s in
            let handling = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 1 {
                        handling.fulfill(())
                        while !(Coroutine.current?.isCancelled ?? true) { jitter(5) }   // until cancelled, without suspending
                    }
                    envelope.reply(envelope.message * 3)
                }
            }
            let r = Coroutine.async(on: s) { () -> [String] in
                _ = try actor.request(0)
                var out = ["reply \(try actor.request(1))"]
                do { out.append("reply \(try actor.request(2))") } catch { out.append("\(error)") }
                return out
            }
            try await handling.value
            actor.cancel()
            #expect(try await r.value == ["reply 3", "\(ActorError.terminated)"])
        }
    }

    // MARK: Fairness

    @Test("a requester in a tight loop of direct requests does not starve a yielding coroutine or a delay on its scheduler")
    func tightLoopDoesNotStarve() async throws {
        let (gaps, requests) = try await Kit.run { () -> ([Int], Int) in
            let actor = Self.makeEcho(on: CoroutineScheduler.current)
            defer { actor.cancel() }
            _ = try actor.request(0)
            let progress = Kit.Counter()
            let stop = Kit.Box(false)
            let delayed = Kit.Box(false)
            let gaps = Kit.Log<Int>()
            let yielder = Coroutine.launch {
                var last = progress.value
                var turns = 0
                while !stop.value {
                    try Coroutine.yield()
                    let now = progress.value
                    gaps.append(now - last)
                    last = now
                    turns += 1
                }
            }
            let sleeper = Coroutine.launch {
                try Coroutine.delay(.milliseconds(2))
                delayed.value = true
            }
            // The loop ends only when both others made progress: it hangs if they starve.
            var n = 0
            while !delayed.value || gaps.all.count < 200 {
                _ = try actor.request(n)
                n += 1
                progress.increment()
            }
            stop.value = true
            try yielder.join()
            try sleeper.join()
            return (gaps.all, n)
        }
        #expect(requests > 0)
        #expect((gaps.max() ?? 0) <= 32, "a yielding coroutine waited for \(gaps.max() ?? 0) requests")
    }

    // MARK: Pools

    @Test("a pool actor requested from coroutines on the pool (direct where they share its scheduler) that the actor answers directly, after suspending, or from the other pool scheduler: every reply is the request's own")
    func poolActorDirectRequests() async throws {
        let pool = SchedulerPool(name: "direct-pool", count: 2)!
        defer { pool.stop() }
        let actor = CoroutineActor<Int, Int>(on: pool) { mailbox in
            for envelope in mailbox {
                let m = envelope.message
                switch m % 4 {
                case 0: envelope.reply(m + 1)
                case 1: try Coroutine.yield(); envelope.reply(m + 1)
                case 2: Coroutine.launch(on: pool) { envelope.reply(m + 1) }
                default: try Coroutine.delay(.microseconds(m % 30)); envelope.reply(m + 1)
                }
            }
        }
        defer { actor.cancel() }
        let requesters = (0..<12).map { r in
            Coroutine.async(on: pool) { () -> [String] in
                var wrong: [String] = []
                for k in 0..<200 {
                    let m = r * 10_000 + k
                    do {
                        let reply = try actor.request(m)
                        if reply != m + 1 { wrong.append("\(m) -> \(reply)") }
                    } catch is CancellationError { break }
                    if k % 50 == 49 { try Coroutine.yield() }
                }
                return wrong
            }
        }
        // Some of them are cancelled along the way
        for (i, r) in requesters.enumerated() where i % 4 == 3 { r.cancel() }
        for r in requesters {
            do {
                let wrong = try await r.value
                #expect(wrong.isEmpty, "\(wrong.prefix(5))")
            } catch is CancellationError {}
        }
    }

    // MARK: Memory

    final class Tracked: Sendable {
        let n: Int
        let released: CoroutineTestKit.Counter
        init(_ n: Int, _ released: CoroutineTestKit.Counter) { self.n = n; self.released = released }
        deinit { released.increment() }
    }

    @Test("a direct request's message is released by the time the requester resumes (the actor took its next message), whether it answered at once, after suspending, or dropped the envelope", arguments: ["reply", "yield", "drop"])
    func messageReleasedByNextIteration(_ how: String) async throws {
        let released = Kit.Counter()
        let wrong = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Tracked, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    switch how {
                    case "reply": envelope.reply(envelope.message.n)
                    case "yield": try Coroutine.yield(); envelope.reply(envelope.message.n)
                    default: if envelope.message.n == 0 { envelope.reply(0) }
                    }
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(Tracked(0, released))
            var wrong: [String] = []
            for i in 1...50 {
                let reply: String
                do { reply = "\(try actor.request(Tracked(i, released)))" } catch { reply = "\(error)" }
                let expected = how == "drop" ? "\(ActorError.noReply)" : "\(i)"
                if reply != expected { wrong.append("\(i) -> \(reply)") }
                if released.value != i + 1 { wrong.append("after \(i): \(released.value) messages released") }
            }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    @Test("a direct envelope kept alive by the actor (array) keeps its message, and the next request gets a fresh envelope and its own reply")
    func keptEnvelopeIsNotReused() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let kept = Kit.Box<[Envelope<Int, Int>]>([])
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    envelope.reply(envelope.message)
                    if envelope.message % 2 == 1 { kept.value.append(envelope) }
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)
            var wrong: [String] = []
            for i in 1...100 {
                let r = try actor.request(i)
                if r != i { wrong.append("\(i) -> \(r)") }
            }
            let ids = Set(kept.value.map { ObjectIdentifier($0) })
            if ids.count != 50 { wrong.append("\(ids.count) distinct kept envelopes") }
            let messages = kept.value.map { $0.message }
            if messages != stride(from: 1, through: 99, by: 2).map({ $0 }) { wrong.append("kept messages changed: \(messages.prefix(5))") }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }
    // MARK: Order after the answer

    @Test("an actor that answers a direct request and then suspends (yield, or a direct request to another actor) resumes the requester next, before coroutines queued earlier")
    func answeredRequesterRunsNext() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            let here = CoroutineScheduler.current
            let other = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox { log.append("other \(envelope.message)"); envelope.reply(envelope.message) }
            }
            let actor = CoroutineActor<Int, Int>(on: here) { mailbox in
                for envelope in mailbox {
                    envelope.reply(envelope.message)
                    if envelope.message == 1 { try Coroutine.yield(); log.append("actor after yield") }
                    if envelope.message == 2 { _ = try other.request(2); log.append("actor after other") }
                }
            }
            defer { actor.cancel(); other.cancel() }
            _ = try other.request(0)
            _ = try actor.request(0)
            log.append("--")
            Coroutine.launch { log.append("queued earlier 1") }
            _ = try actor.request(1)
            log.append("resumed 1")
            try Coroutine.yield()
            Coroutine.launch { log.append("queued earlier 2") }
            _ = try actor.request(2)
            log.append("resumed 2")
            try Coroutine.yield()
        }
        #expect(Array(log.all.drop { $0 != "--" }) == [
            "--", "resumed 1", "queued earlier 1", "actor after yield",
            "other 2", "actor after other", "resumed 2", "queued earlier 2",
        ])
    }

    // MARK: Mixed load

    @Test("plain threads sending while coroutines on the actor's scheduler request directly, the actor yielding, answering from threads or at once, and some requesters cancelled from a plain thread: every answer received is the request's own, each sender's messages in order")
    func mixedLoad() async throws {
        try await Kit.withScheduler("direct-mixed") { s in
            let seen = Kit.Log<Int>()
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    let m = envelope.message
                    seen.append(m)
                    switch m % 5 {
                    case 0: try Coroutine.yield(); envelope.reply(m &+ 1)
                    case 1: Thread { envelope.reply(m &+ 1) }.start()
                    default: envelope.reply(m &+ 1)
                    }
                }
            }
            defer { actor.cancel() }
            let threads = 2, perThread = 1_500
            let promises = Mutex<[(Int, Promise<Int>)]>([])
            let senders = Task.detached {
                try await Kit.onPlainThreads(threads) { t in
                    var mine: [(Int, Promise<Int>)] = []
                    for k in 0..<perThread {
                        let m = (t + 1) * 1_000_000 + k
                        mine.append((m, actor.send(m)))
                        jitter(k)
                    }
                    promises.locked { [mine] in $0 += mine }
                }
            }
            let wrong = Kit.Log<String>()
            let requesters = (0..<6).map { r in
                Coroutine.launch(on: s) {
                    for k in 0..<300 {
                        let m = r * 1_000 + k
                        do {
                            let reply = try actor.request(m)
                            if reply != m + 1 { wrong.append("\(m) -> \(reply)") }
                        } catch is CancellationError { return }
                        scribble(m)
                    }
                }
            }
            try await Kit.onPlainThread {
                for (i, r) in requesters.enumerated() where i % 2 == 1 { jitter(i &* 40); r.cancel() }
            }
            for r in requesters { try? await r.join() }
            #expect(wrong.all.isEmpty, "\(wrong.all.prefix(5))")
            try await senders.value
            for (m, p) in promises.locked({ $0 }) {
                let v = try await p.value
                #expect(v == m + 1)
            }
            let all = seen.all
            for t in 1...threads {
                let mine = all.filter { $0 / 1_000_000 == t }
                #expect(mine == (0..<perThread).map { t * 1_000_000 + $0 }, "sender \(t) out of order")
            }
        }
    }

    @Test("an actor parked inside a generator's body, whose consumer suspends before answering some direct requests and hands others to threads: each requester gets its own reply")
    func generatorParkedActorSuspends() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                let g = Generator<Envelope<Int, Int>> { yield in
                    for envelope in mailbox {
                        if envelope.message % 3 == 0 { try Coroutine.yield() }   // inside the body
                        try yield(envelope)
                    }
                }
                while let envelope = g.next() {
                    let m = envelope.message
                    if m % 3 == 1 { try Coroutine.yield() }                      // in the consumer
                    if m % 4 == 2 { Thread { envelope.reply(m * 7) }.start() } else { envelope.reply(m * 7) }
                }
            }
            defer { actor.cancel() }
            let rs = (0..<4).map { r in
                Coroutine.async { () -> [String] in
                    var wrong: [String] = []
                    for k in 0..<200 {
                        let m = r * 1_000 + k
                        let reply = try actor.request(m)
                        if reply != m * 7 { wrong.append("\(m) -> \(reply)") }
                    }
                    return wrong
                }
            }
            return try rs.flatMap { try $0.await() }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }
    @Test("the scheduler stops while a chain of direct requests is suspended at its tail and other requesters wait: every requester gets an error, every actor ends, none hangs")
    func schedulerStopsDuringDirectChain() async throws {
        let s = CoroutineScheduler(name: "direct-stop")
        defer { s.stop() }
        let atTail = Promise<Void>()
        let never = Promise<Void>()
        let tail = CoroutineActor<Int, Int>(on: s) { mailbox in
            for envelope in mailbox {
                if envelope.message > 0 { atTail.fulfill(()); try never.await() }
                envelope.reply(envelope.message)
            }
        }
        let mid = CoroutineActor<Int, Int>(on: s) { mailbox in
            for envelope in mailbox { envelope.reply(try tail.request(envelope.message)) }
        }
        let head = CoroutineActor<Int, Int>(on: s) { mailbox in
            for envelope in mailbox { envelope.reply(try mid.request(envelope.message)) }
        }
        _ = try await Coroutine.async(on: s) { try head.request(0) }.value
        let outcomes = Kit.Log<String>()
        let requesters = (1...5).map { i in
            Coroutine.launch(on: s) {
                do { outcomes.append("replied \(try head.request(i))") } catch { outcomes.append("threw") }
            }
        }
        try await atTail.value
        s.stop()
        for r in requesters { try? await r.join() }
        for a in [head.coroutine, mid.coroutine, tail.coroutine] { try? await a.join() }
        #expect(!outcomes.all.contains { $0.hasPrefix("replied") }, "\(outcomes.all)")
    }
}
