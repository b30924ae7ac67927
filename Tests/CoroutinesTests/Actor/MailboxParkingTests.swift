import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// The mailbox's lock-free parking (Mailbox.swift, invariants 2–6) and the request hand-off
/// under races: posts from other threads meeting the actor's other waits, timeouts and
/// cancellation, pool actors cancelled around their start, actors parked inside a generator.
@Suite("Actor mailbox parking under races", .serialized)
struct MailboxParkingTests {
    /// A message that the handler awaits `gate` for before replying.
    struct Gated: Sendable {
        let value: Int
        let gate: Promise<Void>
    }

    @Test("a handler awaiting promises settled by plain threads while plain threads post: no post claims the promise wait, every reply arrives in each sender's order")
    func handlerPromiseWaitsRacePosts() async throws {
        try await Kit.withScheduler("parking-gated") { s in
            let seen = Kit.Log<Int>()
            let actor = CoroutineActor<Gated, Int>(on: s) { mailbox in
                for envelope in mailbox {
                    // A non-mailbox wait: its epoch must never look like the mailbox's to a poster
                    try envelope.message.gate.await()
                    seen.append(envelope.message.value)
                    envelope.reply(envelope.message.value)
                }
            }
            defer { actor.cancel() }
            let threads = 3, perThread = 1_500
            let replies = Mutex<[[Promise<Int>]]>(Array(repeating: [], count: threads))
            try await Kit.onPlainThreads(threads) { t in
                var mine: [Promise<Int>] = []
                for k in 0..<perThread {
                    let gate = Promise<Void>()
                    mine.append(actor.send(Gated(value: t * 100_000 + k, gate: gate)))
                    jitter(k &* 13 &+ t)
                    gate.fulfill(())
                }
                replies.locked { [mine] in $0[t] = mine }
            }
            var wrong: [String] = []
            for t in 0..<threads {
                for (k, p) in replies.locked({ $0[t] }).enumerated() {
                    let v = try await p.value
                    if v != t * 100_000 + k { wrong.append("\(t).\(k) -> \(v)") }
                }
                let mine = seen.all.filter { $0 / 100_000 == t }
                if mine != (0..<perThread).map({ t * 100_000 + $0 }) { wrong.append("sender \(t) out of order") }
            }
            #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        }
    }

    @Test("an actor whose first mailbox loop runs inside an expiring withTimeout and a second loop after it: posts racing the timeout are all handled, in each sender's order")
    func timeoutRacesPosts() async throws {
        try await Kit.withScheduler("parking-timeout") { s in
            for round in 0..<60 {
                let seen = Kit.Log<Int>()
                let loops = Kit.Log<String>()
                let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                    do {
                        try Coroutine.withTimeout(.microseconds(round % 20 * 10)) {
                            for envelope in mailbox { seen.append(envelope.message); envelope.reply(envelope.message) }
                        }
                        loops.append("first loop ended without a timeout")
                    } catch CoroutineError.timedOut {
                        loops.append("timed out")
                    }
                    for envelope in mailbox { seen.append(envelope.message); envelope.reply(envelope.message) }
                }
                let replies = Mutex<[[Promise<Int>]]>(Array(repeating: [], count: 2))
                try await Kit.onPlainThreads(2) { t in
                    var mine: [Promise<Int>] = []
                    for k in 0..<200 { mine.append(actor.send(t * 1_000 + k)); jitter(k &+ round) }
                    replies.locked { [mine] in $0[t] = mine }
                }
                for t in 0..<2 {
                    for (k, p) in replies.locked({ $0[t] }).enumerated() {
                        #expect(try await p.value == t * 1_000 + k, "round \(round)")
                    }
                    #expect(seen.all.filter { $0 / 1_000 == t } == (0..<200).map { t * 1_000 + $0 }, "round \(round)")
                }
                actor.cancel()
                try await actor.coroutine.join()
                #expect(loops.all.count == 1, "round \(round): \(loops.all)")
            }
        }
    }

    @Test("an actor cancelled from a plain thread while coroutines on its scheduler hand requests to it: each requester gets its own replies, then only ActorError.terminated; none hangs")
    func cancelRacesHandOffs() async throws {
        for round in 0..<40 {
            let wrong = try await Kit.run { () -> [String] in
                let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox { envelope.reply(envelope.message &* 2) }
                }
                let requesters = (0..<4).map { r in
                    Coroutine.async { () -> [String] in
                        var wrong: [String] = [], terminated = false
                        for k in 0..<2_000 {
                            let m = r * 10_000 + k
                            do {
                                let reply = try actor.request(m)
                                if terminated { wrong.append("\(m) replied after terminated") }
                                if reply != m * 2 { wrong.append("\(m) -> \(reply)") }
                            } catch ActorError.terminated {
                                terminated = true
                            }
                            if terminated && k > 1_000 { break }
                        }
                        return wrong
                    }
                }
                let cancelled = WaitGroup()
                cancelled.add(1)
                Thread.detachNewThread { jitter(round &* 37); spin(microseconds: round % 8 * 50); actor.cancel(); cancelled.done() }
                try cancelled.wait()
                let wrong = try requesters.flatMap { try $0.await() }
                try actor.coroutine.join()
                // After the actor ended, a request is refused at once
                do { _ = try actor.request(-1); return wrong + ["request after the end replied"] } catch ActorError.terminated {}
                return wrong
            }
            #expect(wrong.isEmpty, "round \(round): \(wrong.prefix(5))")
        }
    }

    @Test("a requester on the actor's own scheduler cancelled from another thread at the hand-off gets its own answer or CancellationError; a dropped answer never lands in a later frame")
    func sameSchedulerRequesterCancelledAtHandOff() async throws {
        try await Kit.withScheduler("parking-handoff-cancel") { s in
            let actor = ActorRequestRaceTests.makeJitteredEcho(on: s)
            defer { actor.cancel() }
            var answered = 0, cancelled = 0
            for round in 1...400 {
                let requester = Coroutine.async(on: s) { () -> [Int] in
                    var replies: [Int] = []
                    for k in 0..<3 {
                        replies.append(try actor.request(round * 10 + k))
                        scribble(round)
                    }
                    return replies
                }
                jitter(round &* 11)
                requester.cancel()
                do {
                    let replies = try await requester.value
                    #expect(replies == (0..<3).map { round * 10 + $0 }, "round \(round)")
                    answered += 1
                } catch is CancellationError {
                    cancelled += 1
                }
            }
            #expect(answered + cancelled == 400)
            #expect(try await Coroutine.async(on: s) { try actor.request(-7) }.value == -7)
        }
    }

    @Test("a pool actor cancelled around its start: every message sent, and every request made, after cancel() returned is rejected terminated, whether the actor ran or not")
    func poolActorCancelledAroundStart() async throws {
        let pool = SchedulerPool(name: "parking-pool", count: 2)!
        defer { pool.stop() }
        for round in 0..<200 {
            let handled = Kit.Counter()
            let actor = CoroutineActor<Int, Int>(on: pool) { mailbox in
                for envelope in mailbox { handled.increment(); envelope.reply(envelope.message) }
            }
            if round % 2 == 1 { jitter(round) }
            actor.cancel()
            let sent = (0..<5).map { actor.send($0) }
            let requested = (0..<4).map { i in Coroutine.async(on: pool) { try actor.request(100 + i) } }
            for p in sent {
                await #expect(throws: ActorError.terminated) { try await p.value }
            }
            for c in requested {
                await #expect(throws: ActorError.terminated) { try await c.value }
            }
            try await actor.coroutine.join()
            #expect(handled.value == 0)
        }
    }

    @Test("an actor that parks in its mailbox inside a generator's body (the generator runs on the actor's coroutine) is woken by posts from plain threads and hand-offs, in order")
    func mailboxIteratedInsideGenerator() async throws {
        let wrong = try await Kit.run { () -> [String] in
            let seen = Kit.Log<Int>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                let g = Generator<Envelope<Int, Int>> { yield in
                    for envelope in mailbox { try yield(envelope) }
                }
                while let envelope = g.next() {
                    seen.append(envelope.message)
                    envelope.reply(envelope.message &+ 1)
                }
            }
            defer { actor.cancel() }
            let sent = WaitGroup()
            let replies = Mutex<[Promise<Int>]>([])
            sent.add(2)
            for t in 1...2 {
                Thread.detachNewThread {
                    var mine: [Promise<Int>] = []
                    for k in 0..<1_000 { mine.append(actor.send(t * 100_000 + k)) }
                    replies.locked { $0 += mine }
                    sent.done()
                }
            }
            var wrong: [String] = []
            for k in 0..<1_000 where try actor.request(k) != k + 1 { wrong.append("request \(k)") }
            try sent.wait()
            for p in replies.locked({ $0 }) { _ = try p.await() }
            for t in 0...2 {
                let count = 1_000
                if seen.all.filter({ $0 / 100_000 == t }) != (0..<count).map({ t * 100_000 + $0 }) { wrong.append("sender \(t) out of order") }
            }
            return wrong
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    @Test("an actor whose body returns after 50 messages while plain threads post and coroutines on its scheduler request: every message is answered once, 50 of them with a reply, the rest terminated")
    func bodyReturnsEarlyUnderLoad() async throws {
        for round in 0..<20 {
            let (replied, terminated) = try await Kit.run { () -> (Int, Int) in
                let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    var n = 0
                    for envelope in mailbox {
                        envelope.reply(envelope.message)
                        n += 1
                        if n == 50 { return }
                    }
                }
                let replies = Mutex<[Promise<Int>]>([])
                let sent = WaitGroup()
                sent.add(2)
                for t in 0..<2 {
                    Thread.detachNewThread {
                        var mine: [Promise<Int>] = []
                        for k in 0..<60 { mine.append(actor.send(t * 1_000 + k)); jitter(k &+ round) }
                        replies.locked { $0 += mine }
                        sent.done()
                    }
                }
                let requesters = (0..<3).map { r in
                    Coroutine.async { () -> [Bool] in
                        (0..<40).map { k in (try? actor.request(10_000 + r * 100 + k)) != nil }
                    }
                }
                try sent.wait()
                var replied = 0, terminated = 0
                for p in replies.locked({ $0 }) {
                    do { _ = try p.await(); replied += 1 } catch ActorError.terminated { terminated += 1 }
                }
                for r in requesters {
                    for ok in try r.await() { if ok { replied += 1 } else { terminated += 1 } }
                }
                return (replied, terminated)
            }
            #expect(replied == 50, "round \(round)")
            #expect(replied + terminated == 240, "round \(round)")
        }
    }
}
