import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// An actor answering its direct requester parks *unarmed*, owned by its scheduler's thread
/// (`Mailbox.swift` invariant 12, `CoroutineScheduler.actorOwnedByThread`). These tests put the
/// actor in that state (checked through the slot) and then post, cancel, time out, stop, nest and
/// stress it: nothing may be lost, handled twice, reordered, or hang.
@Suite("Actor parked unarmed: races, stops and timeouts")
struct ActorParkedUnarmedRaceTests {
    /// Whether `actor` is parked unarmed, owned by the calling coroutine's thread.
    static func owned<M, R>(_ actor: CoroutineActor<M, R>) -> Bool {
        guard let s = CoroutineScheduler.current else { return false }
        return s.actorOwnedByThread?.toOpaque() == Unmanaged.passUnretained(actor.coroutine).toOpaque()
    }

    /// Whether some actor is parked unarmed on the calling coroutine's thread.
    static var anyOwned: Bool { CoroutineScheduler.current?.actorOwnedByThread != nil }

    /// Runs `body` on a new plain thread and busy-waits (without suspending: the calling coroutine
    /// keeps its thread, so the loop cannot arm the parked actor meanwhile) until it returned.
    static func onPlainThreadKeepingThisThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let box = Kit.Box<T?>(nil)
        Thread { box.value = body() }.start()
        while true {
            if let v = box.value { return v }
        }
    }

    static func describe(_ body: () throws -> Int) -> String {
        do { return "reply \(try body())" } catch { return Kit.describe(Result<Int, any Error>.failure(error)) }
    }

    /// An echo actor on the current scheduler that logs what it handles and when its loop ends.
    fileprivate static func echo(_ log: Kit.Log<String>) -> CoroutineActor<Int, Int> {
        CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
            for envelope in mailbox {
                log.append("handled \(envelope.message)")
                envelope.reply(envelope.message * 10)
            }
            log.append("loop ended")
        }
    }

    /// An ``echo(_:)`` actor parked unarmed: requested twice (the first request finds it not
    /// yet started, the second is direct), with "owned true" logged if it is then in the slot.
    fileprivate static func parkedEcho(_ log: Kit.Log<String>) throws -> CoroutineActor<Int, Int> {
        let actor = echo(log)
        _ = try actor.request(0)
        _ = try actor.request(1)
        log.append("owned \(owned(actor))")
        return actor
    }

    // MARK: 1. Posts while parked unarmed

    @Test("a plain thread posts while the actor is parked unarmed and the requester keeps the thread: the message is handled before the requester's next request (FIFO)")
    func plainThreadPostThenRequest() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = Self.echo(log)
            defer { actor.cancel() }
            _ = try actor.request(0)   // ordinary: the actor had not started
            _ = try actor.request(1)   // direct: the actor parks unarmed
            log.append("owned \(Self.owned(actor))")
            let promise = Self.onPlainThreadKeepingThisThread { actor.send(2) }
            log.append("posted, owned \(Self.owned(actor))")
            log.append("request 3 -> \(try actor.request(3))")
            log.append("send 2 -> \(try promise.await())")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "posted, owned true",
                        "handled 2", "handled 3", "request 3 -> 30", "send 2 -> 20"])
    }

    @Test("a plain thread posts while the actor is parked unarmed; the requester then awaits that reply: the loop arms the actor and wakes it")
    func plainThreadPostThenAwait() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = try Self.parkedEcho(log)
            defer { actor.cancel() }
            let promise = Self.onPlainThreadKeepingThisThread { actor.send(2) }
            log.append("send 2 -> \(try promise.await())")
            log.append("owned \(Self.owned(actor))")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "handled 2", "send 2 -> 20", "owned false"])
    }

    @Test("a plain thread posts while the actor is parked unarmed; the requester only yields until it is handled: the direct budget gives the loop the thread")
    func plainThreadPostThenYieldLoop() async throws {
        let yields = try await Kit.run { () -> Int in
            let log = Kit.Log<String>()
            let actor = Self.echo(log)
            defer { actor.cancel() }
            _ = try actor.request(0)
            _ = try actor.request(1)
            #expect(Self.owned(actor))
            let promise = Self.onPlainThreadKeepingThisThread { actor.send(2) }
            var yields = 0
            while promise.isPending {
                try Coroutine.yield()
                yields += 1
            }
            #expect(try promise.await() == 20)
            return yields
        }
        #expect(yields >= 1)
    }

    @Test("a same-thread send (post, not request) to the actor parked unarmed is queued and handled once the loop arms it")
    func sameThreadSendWhileParkedUnarmed() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = Self.echo(log)
            defer { actor.cancel() }
            _ = try actor.request(0)
            _ = try actor.request(1)
            let p2 = actor.send(2)
            let p3 = actor.send(3)
            log.append("owned \(Self.owned(actor))")
            log.append("request 4 -> \(try actor.request(4))")
            log.append("sends -> \(try p2.await()) \(try p3.await())")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "handled 2", "handled 3", "handled 4",
                        "request 4 -> 40", "sends -> 20 30"])
    }

    // MARK: 2. Cancellation while parked unarmed

    @Test("cancelled from a plain thread while parked unarmed: the cancellation only sets the flag; join returns once the loop delivers it; later requests and sends are terminated")
    func cancelFromPlainThread() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = try Self.parkedEcho(log)
            defer { actor.cancel() }
            Self.onPlainThreadKeepingThisThread { actor.cancel() }
            log.append("cancelled, owned \(Self.owned(actor)), finished \(actor.coroutine.isFinished)")
            try actor.coroutine.join()
            log.append("joined")
            log.append("request -> \(Self.describe { try actor.request(2) })")
            log.append("send -> \(Self.describe { try actor.send(3).await() })")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "cancelled, owned true, finished false",
                        "loop ended", "joined",
                        "request -> error \(ActorError.terminated)", "send -> error \(ActorError.terminated)"])
    }

    @Test("cancelled from a plain thread while parked unarmed, then requested at once from its thread: not taken directly, the request is terminated")
    func cancelFromPlainThreadThenRequest() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = try Self.parkedEcho(log)
            defer { actor.cancel() }
            Self.onPlainThreadKeepingThisThread { actor.cancel() }
            log.append("request -> \(Self.describe { try actor.request(2) })")
            log.append("owned \(Self.owned(actor))")
            try actor.coroutine.join()
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "loop ended",
                        "request -> error \(ActorError.terminated)", "owned false"])
    }

    @Test("cancelled from its own thread while parked unarmed, then requested at once: the request is terminated, and the actor's loop ended")
    func cancelSameThreadThenRequest() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = try Self.parkedEcho(log)
            defer { actor.cancel() }
            actor.cancel()
            log.append("cancelled, owned \(Self.owned(actor))")
            log.append("request -> \(Self.describe { try actor.request(2) })")
            log.append("request -> \(Self.describe { try actor.request(3) })")
            try actor.coroutine.join()
            log.append("joined")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "cancelled, owned true", "loop ended",
                        "request -> error \(ActorError.terminated)", "request -> error \(ActorError.terminated)",
                        "joined"])
    }

    @Test("cancelled from its own thread while parked unarmed, then sent to and joined: the send is terminated, join returns")
    func cancelSameThreadThenSendAndJoin() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = try Self.parkedEcho(log)
            actor.cancel()
            let p = actor.send(2)
            try actor.coroutine.join()
            log.append("joined")
            log.append("send -> \(Self.describe { try p.await() })")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "loop ended", "joined",
                        "send -> error \(ActorError.terminated)"])
    }

    @Test("the actor's parent cancelled from a plain thread while the actor is parked unarmed: the cancellation reaches the actor once the loop arms it")
    func parentCancelledWhileParkedUnarmed() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let parentDone = Promise<Void>()
            let actorBox = Kit.Box<CoroutineActor<Int, Int>?>(nil)
            let parent = Coroutine.launch {
                let actor = Self.echo(log)
                actorBox.value = actor
                _ = try actor.request(0)
                _ = try actor.request(1)
                log.append("owned \(Self.owned(actor))")
                let me = Coroutine.current!
                Self.onPlainThreadKeepingThisThread { me.cancel() }
                log.append("parent cancelled, owned \(Self.owned(actor))")
                _ = parentDone.fulfill(())
                try actor.coroutine.join()   // throws: the parent is cancelled
            }
            try parentDone.await()
            do { try parent.join() } catch { log.append("parent \(Kit.describe(Result<Int, any Error>.failure(error)))") }
            try actorBox.value!.coroutine.join()
            log.append("actor joined")
            return log.all
        }
        #expect(log.contains("owned true"))
        #expect(log.contains("parent cancelled, owned true"))
        #expect(log.last == "actor joined")
        #expect(log.contains("loop ended"))
    }

    // MARK: 3. withTimeout around the mailbox loop

    @Test("a withTimeout around the actor's mailbox loop expires while the actor is parked unarmed: the loop ends with timedOut, later requests are terminated")
    func timeoutExpiresWhileParkedUnarmed() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let started = Kit.Box<ContinuousClock.Instant?>(nil)
            let limit = Duration.milliseconds(20)
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                // Messages 0 and 1 outside the scope: its deadline counts from the moment the
                // actor parks unarmed after answering 1 (no loop turn can come before).
                for envelope in mailbox {
                    log.append("handled \(envelope.message)")
                    envelope.reply(envelope.message * 10)
                    if envelope.message == 1 { break }
                }
                started.value = .now
                do {
                    try Coroutine.withTimeout(limit) {
                        for envelope in mailbox {
                            log.append("handled \(envelope.message)")
                            envelope.reply(envelope.message * 10)
                        }
                    }
                    log.append("loop returned")
                } catch {
                    log.append("loop \(Kit.describe(Result<Int, any Error>.failure(error)))")
                }
            }
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            // Keep the thread past the deadline (only so that the timer is due when the loop gets
            // the thread back; the outcome does not depend on it).
            while ContinuousClock.now < started.value! + limit + .milliseconds(5) {}
            log.append("past deadline, owned \(Self.owned(actor))")
            try actor.coroutine.join()
            log.append("joined")
            log.append("request -> \(Self.describe { try actor.request(2) })")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "past deadline, owned true",
                        "loop timedOut", "joined", "request -> error \(ActorError.terminated)"])
    }

    @Test("an actor that re-enters its mailbox loop under a short withTimeout each time: timeouts firing at any moment (parked unarmed included) lose, duplicate or reorder nothing")
    func tickingActorUnderLoad() async throws {
        let rounds = 2_000
        let (replies, handled, ticks) = try await Kit.run { () -> ([Int], [Int], Int) in
            let handled = Kit.Log<Int>()
            let ticks = Kit.Counter()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                while !Coroutine.current!.isCancelled {
                    do {
                        try Coroutine.withTimeout(.microseconds(200)) {
                            for envelope in mailbox {
                                handled.append(envelope.message)
                                envelope.reply(envelope.message + 1)
                            }
                        }
                    } catch CoroutineError.timedOut {
                        ticks.increment()
                    }
                }
            }
            defer { actor.cancel() }
            var replies: [Int] = []
            for i in 0..<rounds {
                replies.append(try actor.request(i))
                if i % 7 == 0 {
                    // Keep the thread a little while the actor may be parked unarmed, then give
                    // the loop a turn with nothing else to run (it runs its due timers then).
                    let until = ContinuousClock.now + .microseconds(300)
                    while ContinuousClock.now < until {}
                    if i % 14 == 0 { try Coroutine.delay(.microseconds(1)) }
                }
            }
            return (replies, handled.all, ticks.value)
        }
        #expect(replies == (0..<rounds).map { $0 + 1 })
        #expect(handled == Array(0..<rounds))
        #expect(ticks > 0)
    }

    // MARK: 4. Stops while parked unarmed

    @Test("a dedicated scheduler stopped from a plain thread while an actor is parked unarmed on it: the actor is cancelled and ends, nothing hangs")
    func dedicatedSchedulerStoppedFromPlainThread() async throws {
        let s = CoroutineScheduler(name: "unarmed-stop")
        defer { s.stop() }
        let log = Kit.Log<String>()
        let actorBox = Kit.Box<CoroutineActor<Int, Int>?>(nil)
        let requester = Coroutine.async(on: s) { () -> Bool in
            let actor = Self.echo(log)
            actorBox.value = actor
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            Self.onPlainThreadKeepingThisThread { s.stop() }
            log.append("stop requested, owned \(Self.owned(actor))")
            while true { try Coroutine.yield() }   // the loop handles the stop: this throws
        }
        let box = Kit.Box<CoroutineScheduler?>(s)
        let watchdog = Kit.startWatchdog(limit: hangBound, "stop while parked unarmed", waking: box)
        defer { watchdog.cancel() }
        let outcome = await requester.valueResult
        try await actorBox.value!.coroutine.join()
        #expect(Kit.describe(outcome) == "cancelled")
        #expect(log.all == ["handled 0", "handled 1", "owned true", "stop requested, owned true", "loop ended"])
        #expect(await Kit.eventually(timeout: hangBound) { s.isStopped })
        #expect(Kit.describe(await actorBox.value!.send(5).valueResult) == "error \(ActorError.terminated)")
    }

    @Test("a dedicated scheduler stopped by the requester itself while the actor is parked unarmed: both end")
    func dedicatedSchedulerStoppedFromItsOwnCoroutine() async throws {
        let s = CoroutineScheduler(name: "unarmed-self-stop")
        defer { s.stop() }
        let log = Kit.Log<String>()
        let actorBox = Kit.Box<CoroutineActor<Int, Int>?>(nil)
        let requester = Coroutine.async(on: s) { () -> String in
            let actor = Self.echo(log)
            actorBox.value = actor
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            s.stop()
            log.append("stop requested, owned \(Self.owned(actor))")
            return Self.describe { try actor.request(2) }
        }
        let box = Kit.Box<CoroutineScheduler?>(s)
        let watchdog = Kit.startWatchdog(limit: hangBound, "self-stop while parked unarmed", waking: box)
        defer { watchdog.cancel() }
        let outcome = await requester.valueResult
        try await actorBox.value!.coroutine.join()
        // The request after the stop request may still be answered directly (the loop has not
        // handled the stop yet), or be cancelled/terminated; any is fine, but the log must be whole.
        let all = log.all
        #expect(Array(all.prefix(4)) == ["handled 0", "handled 1", "owned true", "stop requested, owned true"])
        #expect(all.last == "loop ended")
        _ = outcome
        #expect(await Kit.eventually(timeout: hangBound) { s.isStopped })
    }

    @Test("runBlocking whose body throws while an actor is parked unarmed: cancelAll from the coroutine, the actor ends, runBlocking throws the error")
    func runBlockingThrowsWhileParkedUnarmed() async throws {
        let watchdog = Kit.startWatchdog(limit: hangBound, "runBlocking with an unarmed actor", waking: Kit.Box<CoroutineScheduler?>(nil))
        defer { watchdog.cancel() }
        let log = try await Kit.onPlainThread { () -> [String] in
            let log = Kit.Log<String>()
            do {
                _ = try Coroutine.runBlocking { () -> Int in
                    _ = try Self.parkedEcho(log)
                    throw Kit.Boom()
                }
            } catch {
                log.append("runBlocking \(Kit.describe(Result<Int, any Error>.failure(error)))")
            }
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "loop ended", "runBlocking boom \(Kit.Boom())"])
    }

    @Test("runBlocking whose body cancels the actor parked unarmed and returns at once: the actor ends, runBlocking returns the value")
    func runBlockingReturnsRightAfterCancellingTheUnarmedActor() async throws {
        let watchdog = Kit.startWatchdog(limit: hangBound, "runBlocking with a cancelled unarmed actor", waking: Kit.Box<CoroutineScheduler?>(nil))
        defer { watchdog.cancel() }
        let (value, log) = try await Kit.onPlainThread { () -> (Int, [String]) in
            let log = Kit.Log<String>()
            let value = try Coroutine.runBlocking { () -> Int in
                let actor = Self.echo(log)
                _ = try actor.request(0)
                let r = try actor.request(1)
                log.append("owned \(Self.owned(actor))")
                actor.cancel()
                return r
            }
            return (value, log.all)
        }
        #expect(value == 10)
        #expect(log == ["handled 0", "handled 1", "owned true", "loop ended"])
    }

    @Test("Coroutine.run whose body throws while an actor is parked unarmed, and whose awaiting task is cancelled while another is: nothing hangs")
    func coroutineRunEndsWhileParkedUnarmed() async throws {
        let log = Kit.Log<String>()
        do {
            _ = try await Kit.run(limit: hangBound) { () -> Int in
                _ = try Self.parkedEcho(log)
                throw Kit.Boom()
            }
        } catch {
            log.append("run \(Kit.describe(Result<Int, any Error>.failure(error)))")
        }
        #expect(log.all == ["handled 0", "handled 1", "owned true", "loop ended", "run boom \(Kit.Boom())"])

        // The awaiting task cancelled (cancelAll by a job on the loop) while the actor is parked
        // unarmed and the requester keeps the thread.
        let log2 = Kit.Log<String>()
        let parked = Promise<Void>()
        let go = Kit.Box<Bool>(false)
        let task = Task {
            try await Kit.run(limit: hangBound) { () -> String in
                let actor = Self.echo(log2)
                _ = try actor.request(0)
                _ = try actor.request(1)
                log2.append("owned \(Self.owned(actor))")
                _ = parked.fulfill(())
                while !go.value {}
                log2.append("task cancelled, owned \(Self.owned(actor))")
                try actor.coroutine.join()
                return "joined"
            }
        }
        try await parked.value
        task.cancel()
        go.value = true
        let r = await task.result
        #expect(log2.all == ["handled 0", "handled 1", "owned true", "task cancelled, owned true", "loop ended"])
        switch r {
        case .success(let v): Issue.record("the body was not cancelled: \(v)")
        case .failure(let e): #expect(e is CancellationError)
        }
    }

    // MARK: 5. Several actors, nesting, self-requests

    @Test("three actors on one scheduler requested in turn, with plain-thread posts interleaved: the slot holds one, the others arm; every reply right, every sender's order kept")
    func threeActorsAlternately() async throws {
        let rounds = 600
        let result = try await Kit.run { () -> [String] in
            let logs = (0..<3).map { _ in Kit.Log<Int>() }
            let actors = (0..<3).map { k in
                CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                    for envelope in mailbox {
                        logs[k].append(envelope.message)
                        envelope.reply(envelope.message * 3 + k)
                    }
                }
            }
            defer { for a in actors { a.cancel() } }
            try Coroutine.yield()
            var problems: [String] = []
            var ownerSeen = Set<Int>()
            let postsDone = Promise<[Promise<Int>]>()
            Thread {
                var ps: [Promise<Int>] = []
                for i in 0..<rounds { ps.append(actors[i % 3].send(1_000_000 + i)) }
                _ = postsDone.fulfill(ps)
            }.start()
            for i in 0..<rounds {
                let k = i % 3
                let r = try actors[k].request(i)
                if r != i * 3 + k { problems.append("request \(i) to \(k) got \(r)") }
                for j in 0..<3 where Self.owned(actors[j]) { ownerSeen.insert(j) }
                if CoroutineScheduler.current!.actorOwnedByThread != nil,
                   !(0..<3).contains(where: { Self.owned(actors[$0]) }) {
                    problems.append("slot holds something else at \(i)")
                }
            }
            let ps = try postsDone.await()
            for (i, p) in ps.enumerated() {
                let r = try p.await()
                if r != (1_000_000 + i) * 3 + i % 3 { problems.append("send \(i) got \(r)") }
            }
            for k in 0..<3 {
                let all = logs[k].all
                let mine = all.filter { $0 < 1_000_000 }
                let theirs = all.filter { $0 >= 1_000_000 }
                if mine != Array(stride(from: k, to: rounds, by: 3)) { problems.append("actor \(k) requests out of order") }
                if theirs != Array(stride(from: 1_000_000 + k, to: 1_000_000 + rounds, by: 3)) {
                    problems.append("actor \(k) sends out of order")
                }
            }
            if ownerSeen.isEmpty { problems.append("no actor was ever parked unarmed") }
            return problems
        }
        #expect(result == [])
    }

    @Test("nested: an actor's body requests another actor on the same scheduler; the inner one parks unarmed; a plain-thread post to it while parked comes first")
    func nestedRequests() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let inner = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    log.append("inner \(envelope.message)")
                    envelope.reply(envelope.message + 100)
                }
            }
            let outer = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    log.append("outer \(envelope.message)")
                    envelope.reply(try inner.request(envelope.message))
                }
            }
            defer { outer.cancel(); inner.cancel() }
            try Coroutine.yield()
            log.append("r \(try outer.request(1))")
            log.append("r \(try outer.request(2))")
            log.append("inner owned \(Self.owned(inner)), outer owned \(Self.owned(outer))")
            let p = Self.onPlainThreadKeepingThisThread { inner.send(9) }
            log.append("r \(try outer.request(3))")
            log.append("send \(try p.await())")
            for i in 4..<80 { _ = try outer.request(i) }
            log.append("r \(try outer.request(80))")
            return log.all
        }
        #expect(Array(log.prefix(12)) == ["outer 1", "inner 1", "r 101", "outer 2", "inner 2", "r 102",
                                          "inner owned true, outer owned false",
                                          "outer 3", "inner 9", "inner 3", "r 103", "send 109"])
        #expect(log.last == "r 180")
    }

    @Test("an actor requesting itself from its body gets requestFromItself, and keeps answering directly afterwards")
    func requestFromItself() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let me = Kit.Box<CoroutineActor<Int, Int>?>(nil)
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 2 {
                        do {
                            _ = try me.value!.request(7)
                            log.append("self request returned")
                        } catch {
                            log.append("self request \(error)")
                        }
                    }
                    envelope.reply(envelope.message)
                }
            }
            me.value = actor
            defer { actor.cancel() }
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            log.append("r \(try actor.request(2))")
            log.append("r \(try actor.request(3)) owned \(Self.owned(actor))")
            return log.all
        }
        #expect(log == ["owned true", "self request \(ActorError.requestFromItself)", "r 2", "r 3 owned true"])
    }

    @Test("another coroutine of the thread takes the actor parked unarmed for the original requester; then the original requester takes it back")
    func anotherCoroutineTakesTheParkedActor() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = try Self.parkedEcho(log)
            defer { actor.cancel() }
            let other = Coroutine.launch {
                log.append("other r \(try actor.request(2))")
            }
            try other.join()
            log.append("r \(try actor.request(3)) owned \(Self.owned(actor))")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true",
                        "handled 2", "other r 20", "handled 3", "r 30 owned true"])
    }

    // MARK: 6. Past the direct budget, with posts from plain threads

    @Test("thousands of requests in a row (past the 32/64 direct budget) with two plain threads posting: every message answered once, each sender's order kept")
    func pastTheBudgetWithPosts() async throws {
        let n = 3_000
        let posters = 2
        let problems = try await Kit.run { () -> [String] in
            let handled = Kit.Log<(Int, Int)>()
            let actor = CoroutineActor<(Int, Int), Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    handled.append(envelope.message)
                    envelope.reply(envelope.message.0 * 1_000_000 + envelope.message.1)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request((99, 0))
            let sent = (0..<posters).map { _ in Promise<[Promise<Int>]>() }
            for t in 0..<posters {
                Thread {
                    var ps: [Promise<Int>] = []
                    for i in 0..<n { ps.append(actor.send((t + 1, i))) }
                    _ = sent[t].fulfill(ps)
                }.start()
            }
            var problems: [String] = []
            var ownedCount = 0
            for i in 0..<n {
                let r = try actor.request((0, i))
                if r != i { problems.append("request \(i) got \(r)") }
                if Self.owned(actor) { ownedCount += 1 }
            }
            for t in 0..<posters {
                for (i, p) in try sent[t].await().enumerated() {
                    let r = try p.await()
                    if r != (t + 1) * 1_000_000 + i { problems.append("sender \(t) message \(i) got \(r)") }
                }
            }
            let all = handled.all
            for sender in 0...posters {
                let seq = all.filter { $0.0 == sender }.map(\.1)
                if seq != Array(0..<n) { problems.append("sender \(sender): \(seq.count) handled, in order \(seq == seq.sorted())") }
            }
            if ownedCount == 0 { problems.append("never parked unarmed") }
            return problems
        }
        #expect(problems == [])
    }

    @Test("many coroutines of one thread requesting one actor in turn, past the budget: each reply is its own, all answered")
    func manyRequestersOneThread() async throws {
        let (n, k) = (200, 8)
        let problems = try await Kit.run { () -> [String] in
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message) }
            }
            defer { actor.cancel() }
            try Coroutine.yield()
            let bad = Kit.Log<String>()
            let cs = (0..<k).map { c in
                Coroutine.launch {
                    for i in 0..<n {
                        let m = c * 100_000 + i
                        let r = try actor.request(m)
                        if r != m { bad.append("\(c)/\(i) got \(r)") }
                        if i % 13 == 0 { try Coroutine.yield() }
                    }
                }
            }
            for c in cs { try c.join() }
            return bad.all
        }
        #expect(problems == [])
    }

    // MARK: 7. The body ends after being parked unarmed

    @Test("the body returns (break) on a message taken from the slot: the requester gets its reply, join returns, later requests are terminated")
    func bodyBreaksAfterUnarmedTake() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    envelope.reply(envelope.message * 10)
                    if envelope.message == 2 { break }
                }
                log.append("body ends")
            }
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            log.append("r \(try actor.request(2))")
            log.append("owned \(Self.owned(actor))")
            try actor.coroutine.join()
            log.append("joined")
            log.append("request -> \(Self.describe { try actor.request(3) })")
            return log.all
        }
        #expect(log == ["owned true", "body ends", "r 20", "owned false", "joined",
                        "request -> error \(ActorError.terminated)"])
    }

    @Test("the body throws on a message taken from the slot: the requester gets the error, join returns with it as the coroutine's error, later requests are terminated")
    func bodyThrowsAfterUnarmedTake() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 2 { throw Kit.Boom() }
                    envelope.reply(envelope.message * 10)
                }
            }
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            log.append("request -> \(Self.describe { try actor.request(2) })")
            log.append("owned \(Self.owned(actor))")
            try actor.coroutine.join()
            log.append("joined, error \(actor.coroutine.error.map { "\($0)" } ?? "none")")
            log.append("request -> \(Self.describe { try actor.request(3) })")
            return log.all
        }
        #expect(log == ["owned true", "request -> boom \(Kit.Boom())", "owned false", "joined, error \(Kit.Boom())",
                        "request -> error \(ActorError.terminated)"])
    }

    @Test("the body ends after its loop ended on a cancellation delivered while parked unarmed, with code after the loop that suspends and requests another actor")
    func codeAfterTheLoopSuspends() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let other = Self.echo(Kit.Log<String>())
            defer { other.cancel() }
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message) }
                // Cancelled: every suspending call throws now.
                log.append("after loop: \(Self.describe { try other.request(5) })")
            }
            _ = try other.request(0)
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            actor.cancel()
            try actor.coroutine.join()
            log.append("joined")
            log.append("other still answers \(try other.request(6))")
            return log.all
        }
        #expect(log == ["owned true", "after loop: cancelled", "joined", "other still answers 60"])
    }

    // MARK: 8. Pools

    @Test("actors and requesters on a pool of two schedulers (stealing launches), plain threads posting: every reply right")
    func poolActorsAndRequesters() async throws {
        let pool = try #require(SchedulerPool(name: "unarmed-pool", count: 2))
        defer { pool.stop() }
        let box = Kit.Box<CoroutineScheduler?>(nil)
        let watchdog = Kit.startWatchdog(limit: .seconds(120), "pool actors", waking: box)
        defer { watchdog.cancel() }
        let actors = (0..<4).map { k in
            CoroutineActor<Int, Int>(on: pool) { mailbox in
                for envelope in mailbox { envelope.reply(envelope.message &* 7 &+ k) }
            }
        }
        defer { for a in actors { a.cancel() } }
        let bad = Kit.Log<String>()
        let n = 400
        // Requesters launched onto the pool (wherever they start), and requesters launched onto
        // each actor's own scheduler once it runs (direct requests, the slot).
        var requesters: [Promise<Void>] = []
        for r in 0..<6 {
            requesters.append(Coroutine.async(on: pool) {
                for i in 0..<n {
                    let k = (i + r) % 4
                    let m = r * 10_000 + i
                    let got = try actors[k].request(m)
                    if got != m &* 7 &+ k { bad.append("pool requester \(r): \(m) to \(k) got \(got)") }
                }
            })
        }
        for a in actors { _ = try await a.send(0).value }   // started: placement final
        for (k, a) in actors.enumerated() {
            requesters.append(Coroutine.async(on: a.coroutine.scheduler) {
                for i in 0..<n {
                    let j = i % 5 == 0 ? (k + 1) % 4 : k
                    let m = 500_000 + k * 10_000 + i
                    let got = try actors[j].request(m)
                    if got != m &* 7 &+ j { bad.append("colocated requester \(k): \(m) to \(j) got \(got)") }
                }
            })
        }
        try await Kit.onPlainThreads(2) { t in
            for i in 0..<n {
                let k = i % 4
                let m = 900_000 + t * 10_000 + i
                let p = actors[k].send(m)
                _ = p
            }
        }
        for p in requesters { try await p.value }
        for (k, a) in actors.enumerated() {
            #expect(try await a.send(5).value == 35 + k)
        }
        #expect(bad.all == [])
    }

    @Test("a pool stopped from a plain thread while an actor is parked unarmed on one of its schedulers: the actor and its requester end")
    func poolStoppedWhileParkedUnarmed() async throws {
        let pool = try #require(SchedulerPool(name: "unarmed-pool-stop", count: 2))
        defer { pool.stop() }
        let box = Kit.Box<CoroutineScheduler?>(nil)
        let watchdog = Kit.startWatchdog(limit: hangBound, "pool stop while parked unarmed", waking: box)
        defer { watchdog.cancel() }
        let log = Kit.Log<String>()
        let actor = CoroutineActor<Int, Int>(on: pool) { mailbox in
            for envelope in mailbox { envelope.reply(envelope.message) }
            log.append("loop ended")
        }
        _ = try await actor.send(0).value   // started: its scheduler is final
        let s = actor.coroutine.scheduler
        box.value = s
        let requester = Coroutine.async(on: s) { () -> Bool in
            _ = try actor.request(1)
            _ = try actor.request(2)
            log.append("owned \(Self.owned(actor))")
            Self.onPlainThreadKeepingThisThread { pool.stop() }
            log.append("pool stop requested, owned \(Self.owned(actor))")
            while true { try Coroutine.yield() }
        }
        let outcome = await requester.valueResult
        try await actor.coroutine.join()
        #expect(Kit.describe(outcome) == "cancelled")
        #expect(log.all == ["owned true", "pool stop requested, owned true", "loop ended"])
        #expect(await Kit.eventually(timeout: hangBound) { pool.schedulers.allSatisfy(\.isStopped) })
    }

    @Test("cancel(after:) on the actor's coroutine firing while it is parked unarmed: delivered once the loop has the thread, the actor ends")
    func cancelAfterFiresWhileParkedUnarmed() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = Self.echo(log)
            _ = try actor.request(0)
            _ = try actor.request(1)
            actor.coroutine.cancel(after: .milliseconds(1))
            log.append("owned \(Self.owned(actor))")
            let until = ContinuousClock.now + .milliseconds(20)
            while ContinuousClock.now < until {}   // the timer is due when the loop gets the thread
            log.append("still owned \(Self.owned(actor)), cancelled \(actor.coroutine.isCancelled)")
            try actor.coroutine.join()
            log.append("joined")
            return log.all
        }
        #expect(log == ["handled 0", "handled 1", "owned true", "still owned true, cancelled false",
                        "loop ended", "joined"])
    }

    // MARK: 9. Stale parkedEpoch, double resumes

    @Test("taken from the slot, the actor then awaits a promise; a plain-thread post meanwhile must not wake that wait")
    func promiseWaitAfterUnarmedTakeIsNotWokenByAPost() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let gate = Promise<Int>()
            let waiting = Promise<Void>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    if envelope.message == 2 {
                        _ = waiting.fulfill(())
                        let v = try gate.await()
                        log.append("gate \(v), settled \(!gate.isPending)")
                    }
                    log.append("handled \(envelope.message)")
                    envelope.reply(envelope.message * 10)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(0)
            _ = try actor.request(1)
            log.append("owned \(Self.owned(actor))")
            let helper = Coroutine.launch {
                try waiting.await()   // the actor now waits on the gate (its epoch: parkedEpoch's old value)
                let p = Self.onPlainThreadKeepingThisThread { actor.send(3) }
                // Let the loop run a few times: a wrongly woken actor would run now.
                for _ in 0..<100 { try Coroutine.yield() }
                log.append("releasing gate")
                _ = gate.fulfill(7)
                log.append("send 3 -> \(try p.await())")
            }
            log.append("r \(try actor.request(2))")
            try helper.join()
            return log.all
        }
        #expect(Array(log.prefix(7)) == ["handled 0", "handled 1", "owned true", "releasing gate",
                                         "gate 7, settled true", "handled 2", "handled 3"])
        #expect(Set(log.dropFirst(7)) == ["r 20", "send 3 -> 30"])
    }

    @Test("taken from the slot, the actor yields (giving up its requester) while plain threads post: each message handled once, in order")
    func yieldAfterUnarmedTakeWithPosts() async throws {
        let n = 1_000
        let problems = try await Kit.run { () -> [String] in
            let handled = Kit.Log<Int>()
            let actor = CoroutineActor<Int, Int>(on: CoroutineScheduler.current) { mailbox in
                for envelope in mailbox {
                    handled.append(envelope.message)
                    if envelope.message % 3 == 0 { try Coroutine.yield() }
                    envelope.reply(envelope.message)
                }
            }
            defer { actor.cancel() }
            _ = try actor.request(-1)
            let sent = Promise<[Promise<Int>]>()
            Thread {
                var ps: [Promise<Int>] = []
                for i in 0..<n { ps.append(actor.send(1_000_000 + i)) }
                _ = sent.fulfill(ps)
            }.start()
            var problems: [String] = []
            for i in 0..<n {
                let r = try actor.request(i)
                if r != i { problems.append("request \(i) got \(r)") }
            }
            for (i, p) in try sent.await().enumerated() where try p.await() != 1_000_000 + i {
                problems.append("send \(i) wrong")
            }
            let all = handled.all
            if all.filter({ $0 >= 0 && $0 < 1_000_000 }) != Array(0..<n) { problems.append("requests out of order or duplicated") }
            if all.filter({ $0 >= 1_000_000 }) != Array(1_000_000..<(1_000_000 + n)) { problems.append("sends out of order or duplicated") }
            return problems
        }
        #expect(problems == [])
    }

    @Test("a requester whose own withTimeout expires after the actor parked unarmed: the request still completes, the next suspension times out, the actor keeps answering")
    func requesterTimeoutAroundDirectRequests() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let actor = Self.echo(Kit.Log<String>())
            defer { actor.cancel() }
            _ = try actor.request(0)
            do {
                // The scope's timer fires only when the loop runs, which none of the direct
                // requests below lets it do: the durations order nothing but the deadline.
                try Coroutine.withTimeout(.milliseconds(10)) {
                    _ = try actor.request(1)
                    log.append("owned \(Self.owned(actor))")
                    let until = ContinuousClock.now + .milliseconds(15)
                    while ContinuousClock.now < until {}
                    log.append("r \(try actor.request(2))")   // the timer has not run: direct
                    while true { try Coroutine.yield() }      // the loop runs the timer
                }
            } catch {
                log.append("scope \(Kit.describe(Result<Int, any Error>.failure(error)))")
            }
            log.append("after r \(try actor.request(3)) owned \(Self.owned(actor))")
            return log.all
        }
        #expect(log == ["owned true", "r 20", "scope timedOut", "after r 30 owned true"])
    }

    // MARK: Chaos

    /// A deterministic generator (SplitMix64) for the chaos test's choices.
    struct SplitMix {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(n))
        }
    }

    @Test("chaos: requesters of one thread, nested forwards, yields, plain-thread posts and a cancellation midway: every message answered once and right, each sender's order kept", arguments: 0..<4)
    func chaos(seed: Int) async throws {
        let problems = try await Kit.run(limit: .seconds(120)) { () -> [String] in
            let nActors = 4
            let perRequester = 400
            let perPoster = 400
            let handled = (0..<nActors).map { _ in Kit.Log<(Int, Int)>() }
            let actorsBox = Kit.Box<[CoroutineActor<(Int, Int), Int>]>([])
            let bad = Kit.Log<String>()
            let reply: @Sendable (Int, Int) -> Int = { sender, seq in sender * 1_000_000 + seq }
            var actors: [CoroutineActor<(Int, Int), Int>] = []
            for k in 0..<nActors {
                actors.append(CoroutineActor<(Int, Int), Int>(on: CoroutineScheduler.current) { mailbox in
                    var rng = SplitMix(state: UInt64(seed * 97 + k))
                    var forwards = 0
                    for envelope in mailbox {
                        let (sender, seq) = envelope.message
                        handled[k].append((sender, seq))
                        switch rng.next(6) {
                        case 0: try Coroutine.yield()
                        case 1 where k > 0:
                            // Forward to the actor below (same scheduler): a nested request.
                            let me = 1_000 + k
                            let got = try actorsBox.value[k - 1].request((me, forwards))
                            if got != reply(me, forwards) { bad.append("forward \(k) \(forwards) got \(got)") }
                            forwards += 1
                        default: break
                        }
                        envelope.reply(reply(sender, seq))
                    }
                })
            }
            actorsBox.value = actors
            let fixedActors = actors
            let ownedSeen = Kit.Counter()
            let inHandCancelled = Kit.Counter()
            defer { for a in fixedActors { a.cancel() } }
            let cancelled = 3
            // Plain threads: two posters, and one that cancels actor 3 halfway through poster 0.
            let halfway = Promise<Void>()
            let sent = (0..<2).map { _ in Promise<[(Int, Promise<Int>)]>() }
            for t in 0..<2 {
                Thread {
                    var rng = SplitMix(state: UInt64(seed * 31 + 100 + t))
                    var ps: [(Int, Promise<Int>)] = []
                    for i in 0..<perPoster {
                        let k = rng.next(nActors)
                        ps.append((k, fixedActors[k].send((500 + t, i))))
                        if t == 0 && i == perPoster / 2 { _ = halfway.fulfill(()) }
                    }
                    _ = sent[t].fulfill(ps)
                }.start()
            }
            let canceller = Thread {
                while halfway.isPending {}
                fixedActors[cancelled].cancel()
            }
            canceller.start()
            let requesters = (0..<4).map { r in
                Coroutine.launch {
                    var rng = SplitMix(state: UInt64(seed * 17 + r))
                    for i in 0..<perRequester {
                        let k = rng.next(nActors)
                        do {
                            let got = try fixedActors[k].request((r, i))
                            if got != reply(r, i) { bad.append("requester \(r) \(i) to \(k) got \(got)") }
                            if Self.anyOwned { ownedSeen.increment() }
                        } catch ActorError.terminated where k == cancelled {
                        } catch is CancellationError where k == cancelled {
                            inHandCancelled.increment()   // the envelope in hand (the body threw)
                        } catch {
                            bad.append("requester \(r) \(i) to \(k) threw \(error)")
                        }
                        switch rng.next(10) {
                        case 0: try Coroutine.yield()
                        case 1:
                            let until = ContinuousClock.now + .microseconds(50)
                            while ContinuousClock.now < until {}
                        case 2: try Coroutine.delay(.microseconds(1))
                        default: break
                        }
                    }
                }
            }
            for c in requesters { try c.join() }
            for t in 0..<2 {
                for (i, (k, p)) in try sent[t].await().enumerated() {
                    do {
                        let got = try p.await()
                        if got != reply(500 + t, i) { bad.append("poster \(t) \(i) to \(k) got \(got)") }
                    } catch ActorError.terminated where k == cancelled {
                    } catch is CancellationError where k == cancelled {
                        inHandCancelled.increment()
                    } catch {
                        bad.append("poster \(t) \(i) to \(k) threw \(error)")
                    }
                }
            }
            // Every sender's messages to each actor handled in order, none twice; all of them
            // by the actors never cancelled.
            for k in 0..<nActors {
                var bySender: [Int: [Int]] = [:]
                for (sender, seq) in handled[k].all { bySender[sender, default: []].append(seq) }
                for (sender, seqs) in bySender where seqs != seqs.sorted() || Set(seqs).count != seqs.count {
                    bad.append("actor \(k) sender \(sender): out of order or duplicated")
                }
            }
            var problems = bad.all
            let total = (0..<nActors).filter { $0 != cancelled }.map { handled[$0].all.count }.reduce(0, +)
            if total == 0 { problems.append("nothing handled") }
            if inHandCancelled.value > 1 { problems.append("\(inHandCancelled.value) envelopes rejected with the body's CancellationError") }
            if ownedSeen.value == 0 { problems.append("no actor was ever parked unarmed") }
            return problems
        }
        #expect(problems == [])
    }
}
