import CCoroutines
import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Weak references to an actor, its mailbox and an envelope: they go nil exactly when the last
/// strong reference goes.
private final class WeakRefs<Message: Sendable, Reply: Sendable>: @unchecked Sendable {
    weak var actor: CoroutineActor<Message, Reply>?
    weak var mailbox: Mailbox<Message, Reply>?
    weak var envelope: Envelope<Message, Reply>?
    var alive: [String] {
        var a: [String] = []
        if actor != nil { a.append("actor") }
        if mailbox != nil { a.append("mailbox") }
        if envelope != nil { a.append("spare") }
        return a
    }
}

/// A trivial message of 64 bytes.
struct WideMessage: Sendable, Equatable {
    var a, b, c, d, e, f, g, h: Int
    init(_ n: Int) { (a, b, c, d, e, f, g, h) = (n, n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7) }
    init(a: Int, b: Int, c: Int, d: Int, e: Int, f: Int, g: Int, h: Int) {
        (self.a, self.b, self.c, self.d, self.e, self.f, self.g, self.h) = (a, b, c, d, e, f, g, h)
    }
    /// The fields reversed, each plus one.
    var answer: WideMessage { WideMessage(a: h + 1, b: g + 1, c: f + 1, d: e + 1, e: d + 1, f: c + 1, g: b + 1, h: a + 1) }
}

/// A trivial message of 72 bytes, as a tuple.
typealias NineInts = (Int, Int, Int, Int, Int, Int, Int, Int, Int)

/// A trivial message naming its sender, its place in the sender's sequence and how the actor
/// answers it: 0 reply, 1 fail, 2 dropped unanswered.
struct Call: Sendable, Equatable {
    var sender: Int
    var seq: Int
    var kind: Int
    var id: Int { sender * 100_000 + seq }
}

/// Edge cases of the spare envelope (`Mailbox.swift` invariant 10): its release with the
/// mailbox, a body throwing while holding a reused envelope, wide and `Void` trivial messages,
/// the direct budget's boundaries, mixed answers from many senders, and cancellation.
@Suite("Actor envelope reuse: edge cases")
struct EnvelopeReuseEdgeTests {
    /// The reuse is off under ThreadSanitizer and AddressSanitizer (invariant 10).
    static var reuses: Bool { ccoro_fibers_active == 0 }

    /// `fact` where envelopes are reused; under a sanitizer (no reuse, by design) a line that
    /// says so instead: the log and the expectation both go through here.
    static func whereReused(_ fact: @autoclosure () -> String) -> String {
        reuses ? fact() : "no reuse under a sanitizer"
    }

    /// Whether `actor`'s mailbox holds a spare. On the actor's scheduler thread only.
    static func hasSpare<M, R>(_ actor: CoroutineActor<M, R>) -> Bool { actor.mailbox.spare != nil }

    /// Whether the spare is held by the mailbox's reference alone (one strong, no unowned, no
    /// weak): so the mailbox's release is its only one. On the actor's scheduler thread only.
    static func spareIsOnlyReferenced<M, R>(_ actor: CoroutineActor<M, R>) -> Bool {
        guard let s = actor.mailbox.spare else { return false }
        return actor.mailbox.isOnlyReference(s)
    }

    /// The address of the spare, or 0.
    static func spareAddress<M, R>(_ actor: CoroutineActor<M, R>) -> UInt {
        actor.mailbox.spare.map { UInt(bitPattern: $0.toOpaque()) } ?? 0
    }

    /// Spins without suspending (the calling coroutine keeps its thread) until `flag` is set;
    /// records a hang past ``hangBound``.
    static func holdThread(until flag: borrowing Atomic<Bool>, sourceLocation: SourceLocation = #_sourceLocation) {
        let start = ContinuousClock.now
        while !flag.load(ordering: .acquiring) {
            if ContinuousClock.now - start > hangBound {
                Issue.record("hang: the plain thread never signalled", sourceLocation: sourceLocation)
                return
            }
        }
    }

    static func describe<T>(_ body: () throws -> T) -> String {
        Kit.describe(Result { try body() })
    }

    // MARK: 1. The spare goes with the mailbox

    @Test("the spare goes with the mailbox: held by the mailbox's reference alone once the body has ended, it is released when the last reference to the actor is dropped")
    func spareReleasedWithTheMailbox() async throws {
        let refs = WeakRefs<Int, Int>()
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            do {
                let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox {
                        envelope.reply(envelope.message * 10)
                        if envelope.message == 9 { break }   // the body returns
                    }
                }
                refs.actor = actor
                refs.mailbox = actor.mailbox
                var wrong = 0
                var sawSpare = false
                for m in 0..<10 {
                    if try actor.request(m) != m * 10 { wrong += 1 }
                    if Self.hasSpare(actor) { sawSpare = true }
                }
                log.append("wrong replies \(wrong)")
                try actor.coroutine.join()
                log.append("joined, finished \(actor.coroutine.isFinished)")
                if Self.reuses {
                    // The last request reused the spare; the body's end kept its envelope again.
                    log.append("spare seen \(sawSpare), kept at the end \(Self.hasSpare(actor)), only the mailbox's \(Self.spareIsOnlyReferenced(actor))")
                    // A weak reference, taken now that nothing can reuse it, to see it go.
                    refs.envelope = actor.mailbox.spare!.takeUnretainedValue()
                } else {
                    log.append("no reuse under a sanitizer")
                }
                log.append("request after the end: \(Self.describe { try actor.request(11) })")
                log.append("alive while referenced: \(refs.alive)")
            }
            // Every reference to the actor dropped: it, its mailbox and the spare go, here.
            log.append("alive after the drop: \(refs.alive)")
            return log
        }
        let alive = Self.reuses ? ["actor", "mailbox", "spare"] : ["actor", "mailbox"]
        #expect(log == ["wrong replies 0", "joined, finished true",
                        Self.reuses ? "spare seen true, kept at the end true, only the mailbox's true" : "no reuse under a sanitizer",
                        "request after the end: error \(ActorError.terminated)",
                        "alive while referenced: \(alive)",
                        "alive after the drop: []"])
        #expect(refs.alive == [])
    }

    // MARK: 2. The body throws while holding a reused envelope

    @Test("the body throws while holding the reused spare: the requester gets the body's error once, the actor ends with it, later requests are terminated, and a new actor answers the same requester")
    func bodyThrowsHoldingTheReusedSpare() async throws {
        let refs = WeakRefs<Int, Int>()
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let handled = Kit.Log<String>()
            do {
                let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox {
                        handled.append("\(envelope.message) at \(UInt(bitPattern: Unmanaged.passUnretained(envelope).toOpaque()))")
                        if envelope.message == 5 { throw Kit.NumberedBoom(n: 5) }
                        envelope.reply(envelope.message * 10)
                    }
                }
                refs.actor = actor
                refs.mailbox = actor.mailbox
                let replies = try (0..<5).map { try actor.request($0) }
                log.append("replies \(replies)")
                let spare = Self.spareAddress(actor)
                log.append(Self.whereReused("spare before \(spare != 0)"))
                log.append("request 5: \(Self.describe { try actor.request(5) })")
                if Self.reuses {
                    // The throwing request was handed the spare.
                    let last = handled.all.last ?? ""
                    log.append("reused \(last == "5 at \(spare)")")
                    // Answered with the error, the envelope is kept again, held by the mailbox alone.
                    log.append("kept again \(Self.spareAddress(actor) == spare), only the mailbox's \(Self.spareIsOnlyReferenced(actor))")
                } else {
                    log.append(Self.whereReused(""))
                    log.append(Self.whereReused(""))
                }
                try actor.coroutine.join()
                log.append("actor error: \(actor.coroutine.error.map { "\($0)" } ?? "none")")
                log.append("request 6: \(Self.describe { try actor.request(6) })")
                log.append("send 7: \(Kit.describe(Result { try actor.send(7).await() }))")
            }
            log.append("alive after the drop: \(refs.alive)")
            // The same requester, on a new actor: its own replies, reused there too.
            let next = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message + 1000) }
            }
            defer { next.cancel() }
            log.append("new actor \(try (0..<4).map { try next.request($0) })")
            log.append("handled \(handled.all.map { $0.split(separator: " ")[0] })")
            return log
        }
        #expect(log == ["replies [0, 10, 20, 30, 40]", Self.whereReused("spare before true"),
                        "request 5: boom 5", Self.whereReused("reused true"),
                        Self.whereReused("kept again true, only the mailbox's true"),
                        "actor error: \(Kit.NumberedBoom(n: 5))",
                        "request 6: error \(ActorError.terminated)", "send 7: error \(ActorError.terminated)",
                        "alive after the drop: []",
                        "new actor [1000, 1001, 1002, 1003]",
                        "handled [\"0\", \"1\", \"2\", \"3\", \"4\", \"5\"]"])
    }

    @Test("a body that catches its own error and iterates the mailbox again: the reused envelope it threw from answers noReply once, and later requests reuse the spare and get their own replies")
    func bodyCatchesAndContinuesAfterThrowingHoldingTheSpare() async throws {
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let handled = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                var again = true
                while again {
                    again = false
                    do {
                        for envelope in mailbox {
                            handled.append("\(envelope.message)")
                            if envelope.message % 4 == 3 { throw Kit.NumberedBoom(n: envelope.message) }
                            envelope.reply(envelope.message * 10)
                        }
                    } catch {
                        handled.append("caught \(error)")
                        again = true
                    }
                }
                handled.append("loop ended")
            }
            var outcomes: [String] = []
            var spareAfter: [Bool] = []
            for m in 0..<12 {
                outcomes.append(Self.describe { try actor.request(m) })
                spareAfter.append(Self.hasSpare(actor))
            }
            log.append("outcomes \(outcomes)")
            // From the second request on (the first finds the actor not yet waiting), every
            // direct envelope comes back as the spare, the dropped ones too.
            log.append(Self.whereReused("spare after each \(spareAfter.dropFirst().allSatisfy { $0 })"))
            actor.cancel()
            try actor.coroutine.join()
            log.append(contentsOf: handled.all)
            return log
        }
        let noReply = "error \(ActorError.noReply)"
        var expected = ["outcomes \(["value 0", "value 10", "value 20", noReply, "value 40", "value 50", "value 60", noReply, "value 80", "value 90", "value 100", noReply])",
                        Self.whereReused("spare after each true")]
        for m in 0..<12 {
            expected.append("\(m)")
            if m % 4 == 3 { expected.append("caught \(Kit.NumberedBoom(n: m))") }
        }
        expected.append("loop ended")
        #expect(log == expected)
    }

    // MARK: 3. Wide and Void trivial messages

    @Test("a 64-byte struct message and reply across 400 direct requests: each reply is its own request's, and the spare is kept between requests")
    func wideStructMessages() async throws {
        #expect(_isPOD(WideMessage.self))
        #expect(MemoryLayout<WideMessage>.size == 64)
        let (wrong, spareSeen, handled) = try await Kit.run { () -> ([String], Int, Int) in
            let count = Kit.Counter()
            let actor = CoroutineActor<WideMessage, WideMessage>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    count.increment()
                    envelope.reply(envelope.message.answer)
                }
            }
            defer { actor.cancel() }
            var wrong: [String] = []
            var spareSeen = 0
            for n in 0..<400 {
                let r = try actor.request(WideMessage(n * 8))
                if r != WideMessage(n * 8).answer { wrong.append("\(n): \(r)") }
                if Self.hasSpare(actor) { spareSeen += 1 }
            }
            return (wrong, spareSeen, count.value)
        }
        #expect(wrong == [])
        #expect(handled == 400)
        if Self.reuses { #expect(spareSeen > 0) } else { #expect(spareSeen == 0) }
    }

    @Test("a 72-byte tuple message across 400 direct requests: each reply is its own request's, and the spare is kept between requests")
    func wideTupleMessages() async throws {
        #expect(_isPOD(NineInts.self))
        #expect(MemoryLayout<NineInts>.size == 72)
        let (wrong, spareSeen) = try await Kit.run { () -> ([String], Int) in
            let actor = CoroutineActor<NineInts, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    let m = envelope.message
                    // Weighted, so that a field read from the wrong place shows.
                    envelope.reply(m.0 + 2 * m.1 + 3 * m.2 + 4 * m.3 + 5 * m.4 + 6 * m.5 + 7 * m.6 + 8 * m.7 + 9 * m.8)
                }
            }
            defer { actor.cancel() }
            var wrong: [String] = []
            var spareSeen = 0
            for n in 0..<400 {
                let r = try actor.request((n, n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8))
                let expected = (0..<9).reduce(0) { $0 + ($1 + 1) * (n + $1) }
                if r != expected { wrong.append("\(n): \(r) != \(expected)") }
                if Self.hasSpare(actor) { spareSeen += 1 }
            }
            return (wrong, spareSeen)
        }
        #expect(wrong == [])
        if Self.reuses { #expect(spareSeen > 0) } else { #expect(spareSeen == 0) }
    }

    @Test("Void messages and Void replies across 300 direct requests each: replies and failures reach the right request, and the spare is kept between requests")
    func voidMessagesAndReplies() async throws {
        let (problems, spareSeen) = try await Kit.run { () -> ([String], [Int]) in
            var problems: [String] = []
            var spareSeen = [0, 0, 0]
            // Void message, Int reply: a counter.
            let counter = CoroutineActor<Void, Int>(on: CoroutineScheduler.current) { mailbox in
                var n = 0
                for envelope in mailbox {
                    n += 1
                    envelope.reply(n)
                }
            }
            // Int message, Void reply: fails every seventh, with its number.
            let sum = Kit.Box<Int>(0)
            let sink = CoroutineActor<Int, Void>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message % 7 == 0 {
                        envelope.fail(Kit.NumberedBoom(n: envelope.message))
                    } else {
                        sum.value += envelope.message
                        envelope.reply(())
                    }
                }
            }
            // Void message, Void reply; every fifth dropped unanswered.
            let pings = Kit.Counter()
            let ping = CoroutineActor<Void, Void>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if pings.increment() % 5 != 0 { envelope.reply(()) }
                }
            }
            defer { counter.cancel(); sink.cancel(); ping.cancel() }
            var expectedSum = 0
            for i in 1...300 {
                let c = try counter.request(())
                if c != i { problems.append("counter \(i) got \(c)") }
                if Self.hasSpare(counter) { spareSeen[0] += 1 }

                let s = Self.describe { try sink.request(i) }
                let expectedS = i % 7 == 0 ? "boom \(i)" : "value ()"
                if i % 7 != 0 { expectedSum += i }
                if s != expectedS { problems.append("sink \(i) got \(s)") }
                if Self.hasSpare(sink) { spareSeen[1] += 1 }

                let p = Self.describe { try ping.request(()) }
                let expectedP = i % 5 == 0 ? "error \(ActorError.noReply)" : "value ()"
                if p != expectedP { problems.append("ping \(i) got \(p)") }
                if Self.hasSpare(ping) { spareSeen[2] += 1 }
            }
            if sum.value != expectedSum { problems.append("sum \(sum.value) != \(expectedSum)") }
            if pings.value != 300 { problems.append("pings \(pings.value)") }
            return (problems, spareSeen)
        }
        #expect(problems == [])
        if Self.reuses {
            #expect(spareSeen.allSatisfy { $0 > 0 }, "\(spareSeen)")
        } else {
            #expect(spareSeen == [0, 0, 0])
        }
    }

    // MARK: 4. The direct budget's boundaries

    @Test("exactly n direct requests in a row (around the 32/64 budget), a plain-thread post at that point, then more requests: all answered right, each sender's order kept, the post handled between the two runs", arguments: [31, 32, 33, 63, 64, 65])
    func budgetBoundaryWithPlainThreadPost(n: Int) async throws {
        let (log, handled, directFlags, postReply) = try await Kit.run { () -> ([String], [String], [Bool], String) in
            var log: [String] = []
            let handled = Kit.Log<String>()
            let direct = Kit.Log<Bool>()
            let actor = CoroutineActor<Call, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    let m = envelope.message
                    if m.sender >= 0 {
                        handled.append("\(m.sender):\(m.seq)")
                        if m.sender == 0 {
                            let isDirect = mailbox.direct.map { $0.toOpaque() } == Unmanaged.passUnretained(envelope).toOpaque()
                            direct.append(isDirect)
                        }
                    }
                    envelope.reply(m.id)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(Call(sender: -1, seq: 0, kind: 0))   // the actor now waits
            // A turn of the loop: the run starts with a fresh budget.
            let looped = Promise<Void>()
            CoroutineScheduler.current!.execute { _ = looped.fulfill(()) }
            try looped.await()
            var wrong: [String] = []
            for i in 0..<n {
                let m = Call(sender: 0, seq: i, kind: 0)
                let r = try actor.request(m)
                if r != m.id { wrong.append("\(i) got \(r)") }
            }
            // The post, from a plain thread while this coroutine keeps the thread.
            let posted = Atomic<Bool>(false)
            let promise = Kit.Box<Promise<Int>?>(nil)
            Thread.detachNewThread {
                promise.value = actor.send(Call(sender: 1, seq: 0, kind: 0))
                posted.store(true, ordering: .releasing)
            }
            Self.holdThread(until: posted)
            for i in n..<(n + 3) {
                let m = Call(sender: 0, seq: i, kind: 0)
                let r = try actor.request(m)
                if r != m.id { wrong.append("\(i) got \(r)") }
            }
            log.append("wrong \(wrong)")
            let postReply = Kit.describe(Result { try promise.value!.await() })
            return (log, handled.all, direct.all, postReply)
        }
        #expect(log == ["wrong []"])
        #expect(postReply == "value \(Call(sender: 1, seq: 0, kind: 0).id)")
        let expected = (0..<n).map { "0:\($0)" } + ["1:0"] + (n..<(n + 3)).map { "0:\($0)" }
        #expect(handled == expected)
        // The contract (<doc:Actors>): at most 32 direct requests in a row; the ones past the
        // budget take the ordinary path. The first of the run is direct (fresh budget).
        var longest = 0, current = 0
        for d in directFlags {
            current = d ? current + 1 : 0
            longest = max(longest, current)
        }
        #expect(directFlags.count == n + 3)
        #expect(directFlags.first == true)
        #expect(longest <= 32, "\(longest) direct requests in a row")
        // The request right after the post finds it queued: the ordinary path (FIFO).
        #expect(directFlags[n] == false)
    }

    // MARK: 5. Many senders, mixed answers

    /// The `seq`th message of `sender`, its answer kind rotating.
    @Sendable static func mixedCall(_ sender: Int, _ seq: Int) -> Call {
        Call(sender: sender, seq: seq, kind: (sender + seq) % 3)
    }

    /// The answer the sender of `m` must get, as ``CoroutineTestKit/describe(_:)`` writes it.
    @Sendable static func expectedAnswer(_ m: Call) -> String {
        switch m.kind {
        case 0: "value \(m.id)"
        case 1: "boom \(m.id)"
        default: "error \(ActorError.noReply)"
        }
    }

    @Test("8 requesters on the actor's scheduler and 2 plain threads sending, the actor replying, failing or dropping each message: every caller gets exactly its own answer, each sender's order kept")
    func manySendersMixedAnswers() async throws {
        let perSender = 150
        let (problems, spareSeen) = try await Kit.run { () -> ([String], Int) in
            let handled = Kit.Log<Call>()
            let actor = CoroutineActor<Call, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    let m = envelope.message
                    handled.append(m)
                    switch m.kind {
                    case 0: envelope.reply(m.id)
                    case 1: envelope.fail(Kit.NumberedBoom(n: m.id))
                    default: break   // dropped unanswered: noReply
                    }
                }
            }
            defer { actor.cancel() }
            let call = Self.mixedCall, expected = Self.expectedAnswer
            let bad = Kit.Log<String>()
            let spareSeen = Kit.Counter()
            // The plain threads start first, and send while the requesters run.
            let sent = (0..<2).map { _ in Promise<[Promise<Int>]>() }
            for t in 0..<2 {
                Thread {
                    var ps: [Promise<Int>] = []
                    for i in 0..<perSender { ps.append(actor.send(call(8 + t, i))) }
                    _ = sent[t].fulfill(ps)
                }.start()
            }
            let requesters = (0..<8).map { r in
                Coroutine.launch {
                    for i in 0..<perSender {
                        let m = call(r, i)
                        let got = Self.describe { try actor.request(m) }
                        if got != expected(m) { bad.append("requester \(r) #\(i): \(got), expected \(expected(m))") }
                        if Self.hasSpare(actor) { spareSeen.increment() }
                        if i % 7 == r % 7 { try Coroutine.yield() }
                    }
                }
            }
            for c in requesters { try c.join() }
            for t in 0..<2 {
                for (i, p) in try sent[t].await().enumerated() {
                    let m = call(8 + t, i)
                    let got = Kit.describe(Result { try p.await() })
                    if got != expected(m) { bad.append("sender \(8 + t) #\(i): \(got), expected \(expected(m))") }
                }
            }
            let all = handled.all
            var problems = bad.all
            if all.count != 10 * perSender { problems.append("\(all.count) handled") }
            for s in 0..<10 {
                let seqs = all.filter { $0.sender == s }.map(\.seq)
                if seqs != Array(0..<perSender) { problems.append("sender \(s): \(seqs.count) handled, in order \(seqs == seqs.sorted())") }
            }
            return (problems, spareSeen.value)
        }
        #expect(problems == [])
        if Self.reuses { #expect(spareSeen > 0) } else { #expect(spareSeen == 0) }
    }

    // MARK: 6. Cancelled while holding a spare

    enum Cancellation: String, CaseIterable, Sendable {
        case fromItsThreadParkedUnarmed
        case fromPlainThreadParkedUnarmed
        case fromPlainThreadArmed
        case byItsBodyDuringAReusedRequest
    }

    @Test("an actor cancelled while it holds a spare ends; the spare stays with the mailbox, held by it alone, and goes when the actor is dropped; later requests and sends are terminated", arguments: Cancellation.allCases)
    func cancelledHoldingASpare(way: Cancellation) async throws {
        let refs = WeakRefs<Int, Int>()
        let log = try await Kit.run { () -> [String] in
            var log: [String] = []
            let ended = Kit.Log<String>()
            do {
                let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox {
                        if envelope.message == 99 { Coroutine.current!.cancel() }   // its own coroutine
                        envelope.reply(envelope.message * 10)
                    }
                    ended.append("loop ended")
                }
                refs.actor = actor
                refs.mailbox = actor.mailbox
                let replies = try (0..<6).map { try actor.request($0) }
                log.append("replies \(replies)")
                log.append(Self.whereReused("spare \(Self.hasSpare(actor))"))
                switch way {
                case .fromItsThreadParkedUnarmed:
                    actor.cancel()
                case .fromPlainThreadParkedUnarmed:
                    let done = Atomic<Bool>(false)
                    // The thread lets go of its reference before it signals: the drop below
                    // must be the last one.
                    let held = Kit.Box<CoroutineActor<Int, Int>?>(actor)
                    Thread.detachNewThread {
                        held.value?.cancel()
                        held.value = nil
                        done.store(true, ordering: .releasing)
                    }
                    Self.holdThread(until: done)
                case .fromPlainThreadArmed:
                    // A job on the loop: once it ran, the loop had the thread and armed the actor.
                    let looped = Promise<Void>()
                    CoroutineScheduler.current!.execute { _ = looped.fulfill(()) }
                    try looped.await()
                    log.append("armed \(actor.coroutine.epoch.load(ordering: .relaxed) & 1 == 1)")
                    let done = Promise<Void>()
                    let held = Kit.Box<CoroutineActor<Int, Int>?>(actor)
                    Thread.detachNewThread {
                        held.value?.cancel()
                        held.value = nil   // before the signal, as above
                        _ = done.fulfill(())
                    }
                    try done.await()
                case .byItsBodyDuringAReusedRequest:
                    log.append("request 99: \(Self.describe { try actor.request(99) })")
                }
                try actor.coroutine.join()
                log.append(contentsOf: ended.all)
                if Self.reuses {
                    log.append("spare at the end \(Self.hasSpare(actor)), only the mailbox's \(Self.spareIsOnlyReferenced(actor))")
                    refs.envelope = actor.mailbox.spare!.takeUnretainedValue()
                } else {
                    log.append("no reuse under a sanitizer")
                }
                log.append("request: \(Self.describe { try actor.request(7) })")
                log.append("send: \(Kit.describe(Result { try actor.send(8).await() }))")
            }
            log.append("alive after the drop: \(refs.alive)")
            return log
        }
        var expected = ["replies [0, 10, 20, 30, 40, 50]", Self.whereReused("spare true")]
        if way == .fromPlainThreadArmed { expected.append("armed true") }
        if way == .byItsBodyDuringAReusedRequest { expected.append("request 99: value 990") }
        expected += ["loop ended", Self.reuses ? "spare at the end true, only the mailbox's true" : "no reuse under a sanitizer",
                     "request: error \(ActorError.terminated)", "send: error \(ActorError.terminated)",
                     "alive after the drop: []"]
        #expect(log == expected)
        #expect(refs.alive == [])
    }
}
