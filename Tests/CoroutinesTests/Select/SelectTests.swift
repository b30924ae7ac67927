import Foundation
import Synchronization
import CoroutinesTestSupport
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// `select`, as the ChannelsAndSelect article states it (<doc:ChannelsAndSelect>).
@Suite("Select")
struct SelectTests {
    // MARK: Basics

    @Test("select runs the ready receive case with its value")
    func readyReceive() async throws {
        let r = try await Kit.run { () -> String in
            let a = Channel<Int>(capacity: 1), b = Channel<Int>(capacity: 1)
            try b.send(2)
            return try select { s in
                s.receive(from: a) { "a \(String(describing: $0))" }
                s.receive(from: b) { "b \(String(describing: $0))" }
            }
        }
        #expect(r == "b Optional(2)")
    }

    @Test("a blocked select is completed by a sender on another thread")
    func blockedSelectWokenAcrossThreads() async throws {
        try await Kit.withScheduler("select-waker") { other in
            let (r, leftover) = try await Kit.run { () -> (String, Bool) in
                let a = Channel<Int>(), b = Channel<Int>()
                let me = Coroutine.current!
                Coroutine.launch(on: other) {
                    try CK.waitUntilSuspended(me)
                    try b.send(9)
                }
                let r: String = try select { s in
                    s.receive(from: a) { "a \($0 ?? -1)" }
                    s.receive(from: b) { "b \($0 ?? -1)" }
                }
                return (r, try a.trySend(1))
            }
            #expect(r == "b 9")
            #expect(!leftover)
        }
    }

    @Test("a send case hands its value to a waiting receiver")
    func sendCase() async throws {
        let (r, got) = try await Kit.run { () -> (String, Int) in
            let a = Channel<Int>()
            let receiver = Coroutine.async { try a.receive() }
            try Coroutine.yield()
            let r: String = try select { s in
                s.send(41, to: a) { "sent" }
                s.timeout(after: hangBound) { "timeout" }
            }
            return (r, try receiver.await())
        }
        #expect(r == "sent")
        #expect(got == 41)
    }

    @Test("a blocked send case completes when a receiver arrives")
    func blockedSendCase() async throws {
        let (r, got) = try await Kit.run { () -> (String, Int) in
            let a = Channel<Int>(), b = Channel<Int>()
            let me = Coroutine.current!
            let receiver = Coroutine.async { () -> Int in
                try CK.waitUntilSuspended(me)
                return try b.receive()
            }
            let r: String = try select { s in
                s.send(1, to: a) { "sent a" }
                s.send(2, to: b) { "sent b" }
            }
            return (r, try receiver.await())
        }
        #expect(r == "sent b")
        #expect(got == 2)
    }

    @Test("an error thrown by the chosen case's handler propagates from select")
    func handlerThrows() async throws {
        let r = try await Kit.run { () -> String in
            let a = Channel<Int>(capacity: 1)
            try a.send(1)
            return CK.result {
                let v: Int = try select { s in
                    s.receive(from: a) { _ in throw CK.Failure(code: 5) }
                }
                return v
            }
        }
        #expect(r == "failure 5")
    }

    // MARK: Fairness

    @Test("two always-ready channels over 10,000 selects: each chosen 5,000 ± 250 times, not alternating")
    func fairness() async throws {
        let choices = try await Kit.run { () -> [UInt8] in
            let a = Channel<Int>(capacity: 1), b = Channel<Int>(capacity: 1)
            try a.send(0)
            try b.send(0)
            var choices: [UInt8] = []
            choices.reserveCapacity(10_000)
            for _ in 0..<10_000 {
                let chosen: UInt8 = try select { s in
                    s.receive(from: a) { _ in 0 }
                    s.receive(from: b) { _ in 1 }
                }
                choices.append(chosen)
                // Refill the one that was taken: both stay ready.
                _ = try (chosen == 0 ? a : b).trySend(0)
            }
            return choices
        }
        let zeros = choices.count { $0 == 0 }
        var repeats = 0
        for i in 1..<choices.count where choices[i] == choices[i - 1] { repeats += 1 }
        #expect(abs(zeros - 5_000) <= 250, "first chosen \(zeros) times")
        #expect(abs((choices.count - zeros) - 5_000) <= 250)
        #expect(abs(repeats - 4_999) <= 250, "consecutive equal choices: \(repeats)")
    }

    @Test("among three ready cases (receive, send, zero timeout) each is chosen")
    func fairnessMixedCases() async throws {
        let counts = try await Kit.run { () -> [Int] in
            let a = Channel<Int>(capacity: 1), b = Channel<Int>(capacity: 1)
            var counts = [0, 0, 0]
            for _ in 0..<3_000 {
                _ = try a.trySend(0)                  // a is ready to receive from
                _ = try b.tryReceive()                // b has room to send to
                let i: Int = try select { s in
                    s.receive(from: a) { _ in 0 }
                    s.send(1, to: b) { 1 }
                    s.timeout(after: .zero) { 2 }
                }
                counts[i] += 1
            }
            return counts
        }
        for c in counts { #expect(abs(c - 1_000) <= 150, "counts \(counts)") }
    }

    // MARK: Wait queues

    @Test("two selects sharing a channel: the loser keeps all its cases; the winner leaves no waiter behind")
    func loserKeepsWaiting() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let a = Channel<Int>(), b = Channel<Int>(), c = Channel<Int>()
            // Given S1 waiting on a and b, S2 on a and c, and a plain receiver R on b behind S1.
            let s1 = Coroutine.launch {
                let r: String = try select { s in
                    s.receive(from: a) { "S1 a \($0 ?? -1)" }
                    s.receive(from: b) { "S1 b \($0 ?? -1)" }
                }
                log.append(r)
            }
            let s2 = Coroutine.launch {
                let r: String = try select { s in
                    s.receive(from: a) { "S2 a \($0 ?? -1)" }
                    s.receive(from: c) { "S2 c \($0 ?? -1)" }
                }
                log.append(r)
            }
            let r = Coroutine.launch { log.append("R b \(try b.receive())") }
            try CK.waitUntilSuspended([s1, s2, r])
            // When a value is sent on a: the first waiter (S1) wins.
            try a.send(1)
            try s1.join()
            log.append("S2 still waiting \(s2.status == .suspended)")
            // Then S2 is still waiting on a (its entry intact): the next value on a is S2's.
            try a.send(2)
            try s2.join()
            // And R, queued on b behind S1's (now stale) entry, gets the value sent on b.
            try b.send(3)
            try r.join()
            // No stale waiter remains on any channel.
            log.append("a \(try a.trySend(0)) b \(try b.trySend(0)) c \(try c.trySend(0))")
            return log.all
        }
        #expect(log == ["S1 a 1", "S2 still waiting true", "S2 a 2", "R b 3", "a false b false c false"])
    }

    @Test("a select that wins on one channel leaves the other channels' queues intact, in order")
    func winnerLeavesOtherQueuesIntact() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let a = Channel<Int>(), b = Channel<Int>()
            // Receivers on b before and after the select's own entry on b.
            let before = Coroutine.launch { log.append("before \(try b.receive())") }
            try CK.waitUntilSuspended(before)
            let x = Coroutine.launch {
                let r: String = try select { s in
                    s.receive(from: a) { "X a \($0 ?? -1)" }
                    s.receive(from: b) { "X b \($0 ?? -1)" }
                }
                log.append(r)
            }
            try CK.waitUntilSuspended(x)
            let after = Coroutine.launch { log.append("after \(try b.receive())") }
            try CK.waitUntilSuspended(after)
            // X wins on a.
            try a.send(1)
            try x.join()
            // b's queue still has `before` then `after`.
            try b.send(10)
            try b.send(11)
            try before.join()
            try after.join()
            return log.all
        }
        #expect(log == ["X a 1", "before 10", "after 11"])
    }

    @Test("the same channel twice in one select: one case runs, the value is received once")
    func sameChannelTwice() async throws {
        let (log, counts) = try await Kit.run { () -> ([String], [Int]) in
            var log: [String] = []
            let a = Channel<Int>()
            // Blocked, then one value arrives.
            let me = Coroutine.current!
            Coroutine.launch {
                try CK.waitUntilSuspended(me)
                try a.send(5)
            }
            let r: String = try select { s in
                s.receive(from: a) { "first \($0 ?? -1)" }
                s.receive(from: a) { "second \($0 ?? -1)" }
            }
            log.append(r.hasSuffix(" 5") ? "got 5" : r)
            // No stale entry is left on a.
            log.append("trySend \(try a.trySend(6))")
            // Ready: both cases get chosen over many selects.
            let buffered = Channel<Int>(capacity: 1)
            var counts = [0, 0]
            for i in 0..<400 {
                try buffered.send(i)
                let k: Int = try select { s in
                    s.receive(from: buffered) { _ in 0 }
                    s.receive(from: buffered) { _ in 1 }
                }
                counts[k] += 1
            }
            log.append("count \(buffered.count)")
            return (log, counts)
        }
        #expect(log == ["got 5", "trySend false", "count 0"])
        #expect(counts[0] > 100 && counts[1] > 100, "counts \(counts)")
    }

    @Test("one select cannot pair its own send with its own receive on the same channel")
    func noSelfPairing() async throws {
        let (r, timers) = try await Kit.run { () -> (String, Int) in
            let a = Channel<Int>()
            let r: String = try select { s in
                s.send(1, to: a) { "sent" }
                s.receive(from: a) { "received \($0 ?? -1)" }
                s.timeout(after: .milliseconds(30)) { "timeout" }
            }
            return (r, CK.armedTimers())
        }
        #expect(r == "timeout")
        #expect(timers == 0)
    }

    @Test("a select with a send and a receive on one channel pairs with another coroutine's operation")
    func sendAndReceiveSameChannelWithPeer() async throws {
        let results = try await Kit.run { () -> [String] in
            let a = Channel<Int>()
            let me = Coroutine.current!
            let peer = Coroutine.async { () -> Int in
                try CK.waitUntilSuspended(me)
                return try a.receive()
            }
            let r: String = try select { s in
                s.send(1, to: a) { "sent" }
                s.receive(from: a) { "received \($0 ?? -1)" }
            }
            return [r, "peer \(try peer.await())"]
        }
        #expect(results == ["sent", "peer 1"])
    }

    // MARK: otherwise

    @Test("otherwise is taken when nothing is ready, and leaves no waiter behind")
    func otherwiseWhenNothingReady() async throws {
        let (r, leftovers, peerRan) = try await Kit.run { () -> (String, [Bool], Int) in
            let a = Channel<Int>(), b = Channel<Int>(capacity: 1)
            try b.send(0)   // b full: a send case on b is not ready
            let peerRan = Kit.Counter()
            Coroutine.launch { peerRan.increment() }
            let r: String = try select { s in
                s.receive(from: a) { "a \($0 ?? -1)" }
                s.send(2, to: b) { "sent b" }
                s.otherwise { "otherwise" }
            }
            let ran = peerRan.value   // otherwise never suspends
            return (r, [try a.trySend(1), b.count == 1], ran)
        }
        #expect(r == "otherwise")
        #expect(leftovers == [false, true])
        #expect(peerRan == 0)
    }

    @Test("otherwise is not taken when a case is ready")
    func otherwiseNotTakenWhenReady() async throws {
        let outcomes = try await Kit.run { () -> Set<String> in
            let a = Channel<Int>(capacity: 1)
            var outcomes: Set<String> = []
            for i in 0..<200 {
                try a.send(i)
                let r: String = try select { s in
                    s.otherwise { "otherwise" }
                    s.receive(from: a) { _ in "a" }
                }
                outcomes.insert(r)
            }
            // A sender blocked on a rendezvous channel is ready for a receive case too.
            let r = Channel<Int>()
            let sender = Coroutine.launch { try r.send(1) }
            try CK.waitUntilSuspended(sender)
            let x: String = try select { s in
                s.receive(from: r) { "r \($0 ?? -1)" }
                s.otherwise { "otherwise" }
            }
            outcomes.insert(x)
            return outcomes
        }
        #expect(outcomes == ["a", "r 1"])
    }

    @Test("a non-blocking select racing with a send never takes otherwise while a case is ready at every instant",
          arguments: ["send", "close"])
    func nonBlockingSelectRace(other: String) async throws {
        try await Kit.withScheduler("nonblock-race") { remote in
            let (wrong, n) = try await Kit.run { () -> (Int, Int) in
                let n = TestEnvironment.heavyTestsEnabled ? 2_000 : 500
                let done = Channel<Bool>(capacity: 1)
                var wrong = 0
                for _ in 0..<n {
                    let c1 = Channel<Int>(capacity: 1), c2 = Channel<Int>(capacity: 1)
                    try c1.send(1)
                    Coroutine.launch(on: remote) {
                        let ok: Bool = try select { s in
                            s.receive(from: c1) { _ in true }
                            s.receive(from: c2) { _ in true }
                            s.otherwise { false }
                        }
                        try done.send(ok)
                    }
                    // c2 becomes ready before c1 stops being ready.
                    if other == "send" { try c2.send(1) } else { c2.close() }
                    let _: Int = try select { s in
                        s.receive(from: c1) { _ in 0 }
                        s.otherwise { 1 }
                    }
                    if try !done.receive() { wrong += 1 }
                }
                return (wrong, n)
            }
            #expect(wrong == 0, "otherwise taken \(wrong) times out of \(n)")
        }
    }

    // MARK: Closed channels

    @Test("a receive case on a closed, drained channel is ready and gets nil (not otherwise, not the other case)")
    func receiveOnClosed() async throws {
        let rs = try await Kit.run { () -> [String] in
            let closed = Channel<Int>(capacity: 2)
            try closed.send(1)
            closed.close()
            let never = Channel<Int>()
            var rs: [String] = []
            for _ in 0..<3 {
                let r: String = try select { s in
                    s.receive(from: never) { _ in "never" }
                    s.receive(from: closed) { "closed \(String(describing: $0))" }
                    s.otherwise { "otherwise" }
                }
                rs.append(r)
            }
            // Closed with an error: the receive case also gets nil.
            let failed = Channel<Int>()
            failed.close(throwing: CK.Failure(code: 1))
            rs.append(try select { s in s.receive(from: failed) { "failed \(String(describing: $0))" } })
            return rs
        }
        #expect(rs == ["closed Optional(1)", "closed nil", "closed nil", "failed nil"])
    }

    @Test("a send case on a closed channel is ready and makes select throw ChannelError.closed")
    func sendOnClosed() async throws {
        let rs = try await Kit.run { () -> [String] in
            let closed = Channel<Int>(capacity: 2)
            closed.close()
            let never = Channel<Int>()
            var rs: [String] = []
            for _ in 0..<3 {
                rs.append(CK.result {
                    let r: String = try select { s in
                        s.receive(from: never) { _ in "never" }
                        s.send(1, to: closed) { "sent" }
                        s.otherwise { "otherwise" }
                    }
                    return r
                })
            }
            rs.append("count \(closed.count)")
            return rs
        }
        #expect(rs == ["closed", "closed", "closed", "count 0"])
    }

    @Test("closing a channel wakes a blocked select: receive case gets nil, send case throws closed")
    func closeWakesSelect() async throws {
        let rs = try await Kit.run { () -> [String] in
            let a = Channel<Int>(), b = Channel<Int>()
            let never = Channel<Int>()
            let log = Kit.Log<String>()
            let x = Coroutine.launch {
                log.append(CK.result {
                    let r: String = try select { s in
                        s.receive(from: never) { _ in "never" }
                        s.receive(from: a) { "a \(String(describing: $0))" }
                    }
                    return r
                })
            }
            let y = Coroutine.launch {
                log.append(CK.result {
                    let r: String = try select { s in
                        s.receive(from: never) { _ in "never" }
                        s.send(1, to: b) { "sent" }
                    }
                    return r
                })
            }
            try CK.waitUntilSuspended([x, y])
            a.close()
            try x.join()
            b.close()
            try y.join()
            log.append("never free \(try !never.trySend(1))")
            return log.all
        }
        #expect(rs == ["a nil", "closed", "never free true"])
    }

    // MARK: Timeouts

    /// "At once" is checked as order, not time: a coroutine queued on the same scheduler just
    /// before the select runs only if the select suspends, so it must not have run when the
    /// select returns. (An earlier version bounded the select's time by 1 s, a bound a loaded
    /// machine could break without a bug.)
    @Test("a timeout of zero or less is ready at once", arguments: [0, -5])
    func zeroTimeout(millis: Int) async throws {
        let (r, queuedRan, timers) = try await Kit.run { () -> (String, Bool, Int) in
            let a = Channel<Int>()
            let queuedRan = Atomic<Bool>(false)
            let queued = Coroutine.launch { queuedRan.store(true, ordering: .relaxed) }
            let r: String = try select { s in
                s.receive(from: a) { _ in "a" }
                s.timeout(after: .milliseconds(millis)) { "timeout" }
            }
            let ranBeforeReturn = queuedRan.load(ordering: .relaxed)
            try queued.join()
            return (r, ranBeforeReturn, CK.armedTimers())
        }
        #expect(r == "timeout")
        #expect(!queuedRan, "the select suspended: a coroutine queued before it ran first")
        #expect(timers == 0)
    }

    @Test("a zero timeout is a ready case, so otherwise is not taken")
    func zeroTimeoutBeatsOtherwise() async throws {
        let r = try await Kit.run { () -> String in
            try select { s in
                s.otherwise { "otherwise" }
                s.timeout(after: .zero) { "timeout" }
            }
        }
        #expect(r == "timeout")
    }

    @Test("with several timeouts, the earliest wins")
    func earliestTimeoutWins() async throws {
        let (r, elapsed, timers) = try await Kit.run { () -> (String, Duration, Int) in
            let a = Channel<Int>()
            let start = ContinuousClock.now
            let r: String = try select { s in
                s.timeout(after: .milliseconds(400)) { "400" }
                s.receive(from: a) { _ in "a" }
                s.timeout(after: .milliseconds(30)) { "30" }
                s.timeout(after: .milliseconds(200)) { "200" }
            }
            return (r, ContinuousClock.now - start, CK.armedTimers())
        }
        // The 30 ms case won although all three were armed: the order of the timers is the
        // check. No upper bound on the time: the 200 and 400 ms cases losing shows the 30 ms
        // timer fired first, and a bound in milliseconds would measure the machine's load.
        #expect(r == "30")
        #expect(elapsed >= .milliseconds(30))
        #expect(timers == 0)
    }

    @Test("a timeout's timer is released when another case wins", arguments: ["blocked", "ready at once"])
    func timeoutReleasedWhenOtherCaseWins(mode: String) async throws {
        let (r, during, after) = try await Kit.run { () -> (String, Int, Int) in
            let a = Channel<Int>()
            let before = CK.armedTimers()
            let me = Coroutine.current!
            let during = Kit.Box(-1)
            if mode == "blocked" {
                Coroutine.launch {
                    try CK.waitUntilSuspended(me)
                    during.value = CK.armedTimers() - before
                    try a.send(1)
                }
            } else {
                Coroutine.launch { try a.send(1) }
                try Coroutine.yield()   // the sender is now blocked: a receive case is ready
            }
            let r: String = try select { s in
                s.receive(from: a) { "a \($0 ?? -1)" }
                s.timeout(after: hangBound) { "timeout" }
            }
            return (r, during.value, CK.armedTimers() - before)
        }
        #expect(r == "a 1")
        if mode == "blocked" { #expect(during == 1) }
        #expect(after == 0)
    }

    @Test("a select timing out removes its waiters from the channels")
    func timeoutRemovesWaiters() async throws {
        let rs = try await Kit.run { () -> [String] in
            let a = Channel<Int>(), b = Channel<Int>(capacity: 1)
            try b.send(0)
            let r: String = try select { s in
                s.receive(from: a) { _ in "a" }
                s.send(5, to: b) { "b" }
                s.timeout(after: .milliseconds(10)) { "timeout" }
            }
            let bValues = CK.drain(b).values
            return [r, "a \(try a.trySend(1))", "b \(bValues)", "b after \(try b.trySend(6)) \(b.count)"]
        }
        #expect(rs == ["timeout", "a false", "b [0]", "b after true 1"])
    }

    @Test("select inside withTimeout throws timedOut when no case becomes ready")
    func selectInsideWithTimeout() async throws {
        let r = try await Kit.run { () -> String in
            let a = Channel<Int>()
            let outcome = CK.outcome {
                try Coroutine.withTimeout(.milliseconds(20)) {
                    let _: Int = try select { s in s.receive(from: a) { $0 ?? -1 } }
                }
            }
            let leftover = try a.trySend(1)
            return "\(outcome) \(leftover)"
        }
        #expect(r == "timedOut false")
    }

    // MARK: No cases

    @Test("a select with no cases suspends until cancelled")
    func noCases() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let x = Coroutine.launch {
                log.append(CK.result { () -> Int in try select { _ in } })
            }
            try CK.waitUntilSuspended(x)
            try Coroutine.delay(.milliseconds(30))
            log.append("still suspended \(x.status == .suspended && !x.isFinished)")
            x.cancel()
            try x.join()
            return log.all
        }
        #expect(log == ["still suspended true", "cancelled"])
    }

    @Test("a select with only otherwise runs it")
    func onlyOtherwise() async throws {
        let r = try await Kit.run { () -> String in try select { s in s.otherwise { "otherwise" } } }
        #expect(r == "otherwise")
    }
}

extension ChannelExitTests {
    @Test("a second otherwise in one select is a precondition failure")
    func secondOtherwise() async {
        await ChildProcess.run(.failure, id: "secondOtherwise") {
            _ = try await Coroutine.run { () -> Int in
                try select { s in
                    s.otherwise { 1 }
                    s.otherwise { 2 }
                }
            }
        }
    }
}
