import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

private final class GenSlot10: @unchecked Sendable { var g: Generator<Int>? }
private final class WeakCoroutine10: @unchecked Sendable { weak var c: Coroutine? }

/// Review 10: the unretained run queue, unretained channel hand-offs (`ClaimedCoroutine`), the
/// chained `close`, the wait queue's cached head coroutine, the expired-timeout count and
/// coloured stacks.
@Suite("Review 10: unretained run queue, claimed wakes, close chain, timeout count, stack colours")
struct Review10BreakTests {
    // MARK: 1. The run queue holds no references

    @Test("handles dropped at once: yields, direct switches and finishes interleave; every coroutine freed")
    func droppedHandlesYieldAndFinish() async throws {
        let weak = Kit.WeakCoroutines()
        let finished = Kit.Counter()
        try await Kit.run {
            let ch = Channel<Int>()
            for i in 0..<300 {
                // The handle is dropped here: only the registry keeps the coroutine alive.
                weak.add(Coroutine.launch {
                    for _ in 0..<(i % 5) { try Coroutine.yield() }
                    if i % 3 == 0 {
                        try ch.send(i)
                    } else if i % 3 == 1 {
                        _ = try ch.receive()
                    }
                    // Children launched, queued unstarted, some cancelled at once, handles dropped.
                    if i % 7 == 0 {
                        let child = Coroutine.launch { try Coroutine.yield(); finished.increment() }
                        if i % 14 == 0 { child.cancel() }
                    }
                    finished.increment()
                })
            }
        }
        // i % 3 == 0: 100 senders, i % 3 == 1: 100 receivers: all paired.
        #expect(finished.value == 300 + (0..<300).filter { $0 % 7 == 0 && $0 % 14 != 0 }.count)
        #expect(weak.count == 300)
        #expect(weak.alive == 0)
    }

    @Test("unstarted coroutines cancelled while queued, then the scheduler stopped: each finishes once and is freed")
    func unstartedCancelledThenStopped() async throws {
        for round in 0..<10 {
            let weak = Kit.WeakCoroutines()
            let released = Kit.Counter()
            let s = CoroutineScheduler(name: "r10-stop-\(round)")
            let started = Promise<Void>()
            // A coroutine that keeps the run queue busy until the stop.
            weak.add(Coroutine.launch(on: s) {
                started.fulfill(())
                while true { try Coroutine.yield() }
            })
            try await started.value
            try await Kit.onPlainThreads(2) { k in
                for i in 0..<200 {
                    let t = Kit.Tracker(released)
                    let c = Coroutine.launch(on: s) {
                        _ = t
                        // Launch a child onto this scheduler (queued unstarted) and cancel it.
                        let child = Coroutine.launch { _ = t; try Coroutine.yield() }
                        if i % 2 == 0 { child.cancel() }
                        try Coroutine.yield()
                    }
                    if (i + k) % 3 == 0 { c.cancel() }
                    weak.add(c)
                }
            }
            s.stop()
            #expect(await Kit.eventually { s.isStopped })
            #expect(released.value == 400)
            #expect(weak.alive == 0)
        }
    }

    @Test("a body that throws in runBlocking-style drive cancels queued unstarted coroutines; all freed")
    func runErrorCancelsQueued() async throws {
        struct Boom: Error {}
        let weak = Kit.WeakCoroutines()
        let ran = Kit.Counter()
        await #expect(throws: Boom.self) {
            try await Kit.run {
                for _ in 0..<200 {
                    weak.add(Coroutine.launch { ran.increment(); try Coroutine.yield() })
                }
                throw Boom()
            }
        }
        #expect(ran.value == 0)
        #expect(weak.alive == 0)
    }

    // MARK: 2, 3. Claimed wakes across threads; close chains claimed records

    @Test("rendezvous ping-pong across two schedulers, handles dropped: every value once, nothing leaked")
    func crossSchedulerPingPong() async throws {
        try await ChannelTestKit.withSchedulers(2, "r10") { s in
            let (a, b) = (s[0], s[1])
            let weak = Kit.WeakCoroutines()
            let sum = Kit.Counter()
            let done = WaitGroup()
            let pairs = 16, n = 300
            done.add(2 * pairs)
            for p in 0..<pairs {
                let ping = Channel<Int>(), pong = Channel<Int>()
                weak.add(Coroutine.launch(on: a) {
                    defer { done.done() }
                    for i in 0..<n { try ping.send(i); _ = try pong.receive() }
                    _ = ping.close()
                })
                weak.add(Coroutine.launch(on: p % 2 == 0 ? b : a) {
                    defer { done.done() }
                    for v in ping { sum.increment(); try pong.send(v) }
                })
            }
            try await Kit.onPlainThread { try Coroutine.runBlocking { try done.wait() } }
            #expect(sum.value == pairs * n)
            #expect(await Kit.eventually { weak.alive == 0 })
        }
    }

    @Test("close races selects naming one channel twice, on three schedulers: each select ends once, closed or with a value")
    func closeRacesSelectSameChannelTwice() async throws {
        try await ChannelTestKit.withSchedulers(3, "r10-sel") { schedulers in
            let weak = Kit.WeakCoroutines()
            for round in 0..<40 {
                let ch = Channel<Int>()
                let outcomes = Kit.Log<String>()
                let selectors = (0..<6).map { k in
                    Coroutine.launch(on: schedulers[k % 3]) {
                        let r: String
                        if k % 2 == 0 {
                            // Two receive cases on the same channel.
                            r = try select { s in
                                s.receive(from: ch) { $0.map { "a\($0)" } ?? "closed" }
                                s.receive(from: ch) { $0.map { "b\($0)" } ?? "closed" }
                            }
                        } else {
                            // A send and a receive case on the same channel.
                            do {
                                r = try select { s in
                                    s.send(round * 100 + k, to: ch) { "sent" }
                                    s.receive(from: ch) { $0.map { "got\($0)" } ?? "closed" }
                                }
                            } catch ChannelError.closed {
                                outcomes.append("send-closed")
                                return
                            }
                        }
                        outcomes.append(r)
                    }
                }
                for c in selectors { weak.add(c) }
                let closer = Coroutine.launch(on: schedulers[round % 3]) {
                    if round % 2 == 0 { try Coroutine.yield() }
                    _ = ch.close()
                }
                for c in selectors { try await c.join() }
                try await closer.join()
                let all = outcomes.all
                #expect(all.count == 6)
                // Each "sent" pairs with exactly one receive that got a value.
                let sent = all.filter { $0 == "sent" }.count
                let got = all.filter { $0.hasPrefix("a") || $0.hasPrefix("b") || $0.hasPrefix("got") }.count
                #expect(sent == got, "round \(round): \(all)")
            }
            #expect(await Kit.eventually { weak.alive == 0 })
        }
    }

    @Test("close races cancellation and timeouts of waiters on other schedulers: each waiter ends exactly once")
    func closeRacesCancelAndTimeout() async throws {
        try await ChannelTestKit.withSchedulers(2, "r10-w") { s in
            let (a, b) = (s[0], s[1])
            for round in 0..<30 {
                let ch = Channel<Int>()
                let ends = Kit.Counter()
                let closedSeen = Kit.Counter()
                let waiters = (0..<8).map { k in
                    Coroutine.launch(on: k % 2 == 0 ? a : b) {
                        defer { ends.increment() }
                        do {
                            if k % 4 == 3 {
                                try ch.send(k)
                            } else if k % 4 == 2 {
                                _ = try Coroutine.withTimeout(.microseconds(50 * (round % 5))) { try ch.receive() }
                            } else {
                                _ = try ch.receive()
                            }
                        } catch ChannelError.closed {
                            closedSeen.increment()
                        } catch is CancellationError {
                        } catch CoroutineError.timedOut {
                        }
                    }
                }
                let disruptor = Coroutine.launch(on: round % 2 == 0 ? b : a) {
                    for (i, w) in waiters.enumerated() where i % 4 == 1 { w.cancel() }
                    _ = ch.close()
                }
                for w in waiters { try await w.join() }
                try await disruptor.join()
                // A waiter cancelled before it started never runs its body.
                let unstarted = waiters.filter { $0.error is CancellationError }.count
                #expect(ends.value + unstarted == 8)
                for (i, w) in waiters.enumerated() { #expect(w.error == nil || (i % 4 == 1 && w.error is CancellationError)) }
            }
        }
    }

    @Test("close from a plain thread wakes a hundred waiters on two schedulers, chained; all see the close")
    func closeWakesManyChained() async throws {
        try await ChannelTestKit.withSchedulers(2, "r10-c") { s in
            let (a, b) = (s[0], s[1])
            for _ in 0..<10 {
                let ch = Channel<Int>()
                let blocked = WaitGroup()
                let closed = Kit.Counter()
                blocked.add(50)
                let waiters = (0..<100).map { k in
                    Coroutine.launch(on: k % 2 == 0 ? a : b) {
                        // A big frame, so that a record read after its owner resumed would be
                        // overwritten at once.
                        do {
                            if k % 2 == 0 {
                                try select { s in
                                    s.receive(from: ch) { _ in () }
                                    s.timeout(after: .seconds(30)) { () }
                                }
                                // select runs the receive body with nil on close
                                closed.increment()
                            } else {
                                blocked.done()
                                _ = try ch.receive()
                            }
                        } catch ChannelError.closed {
                            closed.increment()
                        }
                        var junk = [UInt8](repeating: UInt8(k & 0xFF), count: 512)
                        junk.withUnsafeMutableBytes { p in _ = Kit.opaque(p.count) }
                    }
                }
                // Let the odd ones block (the even ones may or may not have queued yet).
                try await Kit.onPlainThread { try Coroutine.runBlocking { try blocked.wait() } }
                _ = ch.close()
                for w in waiters { try await w.join() }
                #expect(closed.value == 100)
            }
        }
    }

    // MARK: 4. The cached head coroutine

    @Test("ChannelWaitQueue: headCoroutine is the head record's coroutine after every append, pop and remove")
    func headCoroutineInvariant() throws {
        let s = CoroutineScheduler(name: "r10-ids")
        s.stop()
        var ids: [Coroutine] = []
        for _ in 0..<6 { ids.append(Coroutine.launch(on: s) {}) }
        let outcome = UnsafeMutablePointer<WaitOutcome>.allocate(capacity: 1)
        outcome.initialize(to: WaitOutcome())
        defer { outcome.deallocate() }
        let element = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
        defer { element.deallocate() }
        let records = UnsafeMutablePointer<ChannelWaiter>.allocate(capacity: 12)
        defer { records.deallocate() }
        for i in 0..<12 {
            (records + i).initialize(to: ChannelWaiter(coroutine: Unmanaged.passUnretained(ids[i % 6]), epoch: 1,
                                                       element: element, outcome: outcome, caseIndex: i))
        }
        var q = ChannelWaitQueue()
        var model: [Int] = []
        var rng = SystemRandomNumberGenerator()
        func check() {
            #expect(q.headCoroutine?.toOpaque() == q.head?.pointee.coroutine.toOpaque())
            #expect(q.head == model.first.map { records + $0 })
            #expect(q.tail == model.last.map { records + $0 })
            q.prefetchHead()
        }
        for _ in 0..<5000 {
            let op = Int.random(in: 0..<3, using: &rng)
            let i = Int.random(in: 0..<12, using: &rng)
            switch op {
            case 0 where !model.contains(i):
                q.append(records + i); model.append(i)
            case 1:
                let p = q.popFirst()
                #expect(p == model.first.map { records + $0 })
                if !model.isEmpty { model.removeFirst() }
            default:
                q.remove(records + i); model.removeAll { $0 == i }
            }
            check()
        }
    }

    @Test("ChannelStateMachine.close chains only claimed records, receivers then senders, and leaves none linked")
    func closeChainsClaimedRecords() throws {
        let s = CoroutineScheduler(name: "r10-chain")
        s.stop()
        let x = Coroutine.launch(on: s) {}, y = Coroutine.launch(on: s) {}, z = Coroutine.launch(on: s) {}
        let ex = x.armEpoch(), ey = y.armEpoch(), ez = z.armEpoch()
        let outcomes = UnsafeMutablePointer<WaitOutcome>.allocate(capacity: 3)
        outcomes.initialize(repeating: WaitOutcome(), count: 3)
        defer { outcomes.deallocate() }
        let element = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
        defer { element.deallocate() }
        // x: a select with two receive cases and a send case on this channel; y a receiver;
        // z a sender whose wait was already claimed by someone else (a canceller).
        let r = UnsafeMutablePointer<ChannelWaiter>.allocate(capacity: 5)
        defer { r.deallocate() }
        r.initialize(to: ChannelWaiter(coroutine: .passUnretained(x), epoch: ex, element: element, outcome: outcomes, caseIndex: 0))
        (r + 1).initialize(to: ChannelWaiter(coroutine: .passUnretained(y), epoch: ey, element: element, outcome: outcomes + 1, caseIndex: 0))
        (r + 2).initialize(to: ChannelWaiter(coroutine: .passUnretained(x), epoch: ex, element: element, outcome: outcomes, caseIndex: 1))
        (r + 3).initialize(to: ChannelWaiter(coroutine: .passUnretained(x), epoch: ex, element: element, outcome: outcomes, caseIndex: 2))
        (r + 4).initialize(to: ChannelWaiter(coroutine: .passUnretained(z), epoch: ez, element: element, outcome: outcomes + 2, caseIndex: 0))
        var m = ChannelStateMachine<Int>(capacity: 0)
        m.receivers.append(r); m.receivers.append(r + 1); m.receivers.append(r + 2)
        m.senders.append(r + 3); m.senders.append(r + 4)
        #expect(z.tryClaim(epoch: ez))   // claimed elsewhere: must be skipped
        let (closed, first) = m.close(error: nil)
        #expect(closed)
        var chain: [UnsafeMutablePointer<ChannelWaiter>] = []
        var p = first
        while let w = p { chain.append(w); p = w.pointee.next }
        #expect(chain == [r, r + 1])
        #expect(outcomes[0].closed && outcomes[0].caseIndex == 0)
        #expect(outcomes[1].closed && outcomes[1].caseIndex == 0)
        #expect(!outcomes[2].closed)
        for i in 0..<5 {
            #expect(!m.receivers.contains(r + i) && !m.senders.contains(r + i))
            #expect(r[i].previous == nil)
        }
        #expect(m.receivers.headCoroutine == nil && m.senders.headCoroutine == nil)
        #expect(m.close(error: nil).closed == false)
    }

    // MARK: 5. The expired-timeout count

    @Test("nested withTimeout: inner expiry swallowed, outer keeps suspending; the count returns to zero")
    func nestedTimeoutSwallowed() async throws {
        let results = try await Kit.run { () -> [String] in
            var log: [String] = []
            let c = Coroutine.current!
            let v: Int = try Coroutine.withTimeout(.seconds(30)) {
                do {
                    _ = try Coroutine.withTimeout(.zero) { () -> Int in
                        do { try Coroutine.delay(.seconds(5)) } catch CoroutineError.timedOut { log.append("inner op timed out") }
                        return 1
                    }
                } catch CoroutineError.timedOut {
                    log.append("inner scope timed out")
                }
                log.append("count after inner \(c.expiredTimeoutScopes)")
                try Coroutine.delay(.milliseconds(1))   // must not time out
                try Coroutine.yield()
                return 7
            }
            log.append("v \(v) count \(c.expiredTimeoutScopes)")
            // A scope whose timer fires: removed after the body ended.
            do {
                try Coroutine.withTimeout(.milliseconds(2)) { try Coroutine.delay(.seconds(5)) }
            } catch CoroutineError.timedOut { log.append("timer scope timed out") }
            log.append("count \(c.expiredTimeoutScopes)")
            // A scope that ends before its timer: the timer must never fire later.
            _ = try Coroutine.withTimeout(.milliseconds(2)) { 1 }
            try Coroutine.delay(.milliseconds(10))
            log.append("late timer ignored, count \(c.expiredTimeoutScopes)")
            // Both scopes expire.
            do {
                try Coroutine.withTimeout(.milliseconds(1)) {
                    try Coroutine.withTimeout(.zero) {
                        do { try Coroutine.delay(.seconds(5)) } catch {}
                        try Coroutine.delay(.milliseconds(5))   // still expired: throws
                    }
                }
            } catch CoroutineError.timedOut { log.append("both timed out") }
            log.append("final count \(c.expiredTimeoutScopes)")
            try Coroutine.delay(.milliseconds(1))
            return log
        }
        #expect(results == [
            "inner op timed out", "inner scope timed out", "count after inner 0", "v 7 count 0",
            "timer scope timed out", "count 0", "late timer ignored, count 0", "both timed out", "final count 0",
        ])
    }

    @Test("outer scope expires while an inner one runs: the inner rethrows, the outer reports, count back to zero")
    func outerExpiresDuringInner() async throws {
        let (outcome, count) = try await Kit.run { () -> (String, Int) in
            let c = Coroutine.current!
            do {
                try Coroutine.withTimeout(.milliseconds(2)) {
                    try Coroutine.withTimeout(.seconds(30)) { try Coroutine.delay(.seconds(5)) }
                }
                return ("returned", c.expiredTimeoutScopes)
            } catch CoroutineError.timedOut {
                try Coroutine.delay(.milliseconds(1))
                return ("timedOut", c.expiredTimeoutScopes)
            }
        }
        #expect(outcome == "timedOut")
        #expect(count == 0)
    }

    @Test("a generator suspended inside withTimeout, resumed by another coroutine after its first host finished")
    func generatorTimeoutScopeOutlivesHost() async throws {
        try await Kit.withScheduler("r10-gen") { s in
            let slot = GenSlot10()
            let weak = WeakCoroutine10()
            func startHost(_ duration: Duration) async throws {
                let h1 = Coroutine.launch(on: s) {
                    let g = Generator<Int> { y in
                        try Coroutine.withTimeout(duration) { try y(1); try y(2) }
                    }
                    _ = g.next()
                    slot.g = g
                }
                weak.c = h1
                try await h1.join()
            }
            for duration: Duration in [.seconds(30), .milliseconds(1)] {
                try await startHost(duration)
                // A job after the join runs after the loop reaped the finished host.
                let aliveAfterReap = try await Kit.onSchedulerLoop(s) { weak.c != nil }
                // The scope's bookkeeping (and, for the short one, its timer) refers to the first host.
                #expect(aliveAfterReap, "the host was freed while a generator body was still inside its withTimeout scope")
                let h2 = Coroutine.launch(on: s) {
                    if duration < .seconds(1) { try Coroutine.delay(.milliseconds(5)) }   // the scope's timer fires
                    let g = slot.g!
                    slot.g = nil
                    var got: [Int] = []
                    while let v = g.next() { got.append(v) }
                    #expect(got == [2])
                    #expect(Coroutine.current!.expiredTimeoutScopes == 0)
                }
                try await h2.join()
                #expect(h2.error == nil)
                #expect(try await Kit.onSchedulerLoop(s) { weak.c == nil })
            }
        }
    }

    // MARK: 6. Coloured stacks

    @Test("guarded stacks of several sizes: guard >= 64 KiB, whole stack writable, top inside the mapping")
    func guardedStacksGuardAndBounds() throws {
        let page = Int(ccoro_page_size())
        for size in [16 * 1024, 64 * 1024, 256 * 1024, 256 * 1024 + page, 1024 * 1024] {
            var stacks = [ccoro_stack](repeating: ccoro_stack(), count: 40)
            defer { for i in stacks.indices { ccoro_stack_unmap_guarded(&stacks[i]) } }
            for i in stacks.indices { #expect(ccoro_stack_map_guarded(size, &stacks[i]) == 0) }
            for s in stacks {
                let m = Int(bitPattern: s.mapping), top = Int(bitPattern: s.top), base = Int(bitPattern: s.base)
                #expect(Int(bitPattern: s.guard_lo) == m)
                #expect(base - m >= Int(CCORO_GUARD_SIZE))
                #expect(top - base == size && s.size == size)
                #expect(top <= m + s.mapping_size)
                #expect(top % page == 0 && base % page == 0)
                // The whole usable stack is writable; release_memory leaves it usable.
                memset(s.base, 0x5A, size)
                ccoro_stack_release_memory([s])
                #expect(s.base.load(as: UInt8.self) == 0)
                memset(s.base, 0x5A, size)
            }
        }
    }

    @Test("guarded stacks mapped from several plain threads at once: no data race on the page size")
    func concurrentGuardedMaps() async throws {
        // Under ThreadSanitizer this reported a race on `ccoro_page_size`'s lazily filled static,
        // which every guarded map now reads.
        let ok = Kit.Counter()
        try await Kit.onPlainThreads(4) { _ in
            for _ in 0..<25 {
                var s = ccoro_stack()
                guard ccoro_stack_map_guarded(64 * 1024, &s) == 0 else { continue }
                if Int(bitPattern: s.base) - Int(bitPattern: s.guard_lo) >= Int(CCORO_GUARD_SIZE) { ok.increment() }
                ccoro_stack_unmap_guarded(&s)
            }
        }
        #expect(ok.value == 100)
    }

    @Test("slab slots: using a whole slot and releasing its memory leaves every canary intact")
    func slabCanariesSurviveUseAndRelease() throws {
        let count = 40
        var slots = [ccoro_stack](repeating: ccoro_stack(), count: count)
        #expect(ccoro_stack_map_slab(64 * 1024, count, &slots) == 0)
        defer { munmap(slots[0].mapping, slots[0].mapping_size) }
        for s in slots { ccoro_stack_arm_canary([s]) }
        for (i, s) in slots.enumerated() {
            // Every byte a coroutine may use: [base, top).
            memset(s.base, 0xEE, Int(bitPattern: s.top) - Int(bitPattern: s.base))
            #expect(slots.allSatisfy { ccoro_stack_canary_ok([$0]) != 0 }, "slot \(i) smashed a canary")
            ccoro_stack_release_memory([s])
            #expect(slots.allSatisfy { ccoro_stack_canary_ok([$0]) != 0 }, "releasing slot \(i) lost a canary")
            if i > 0 {
                // The canary sits just below the slot, in the top 64 bytes of the slot below.
                let canary = Int(bitPattern: s.canary)
                #expect(canary == Int(bitPattern: s.base) - 8)
                #expect(canary >= Int(bitPattern: slots[i - 1].top))
            }
        }
        #expect(Int(bitPattern: slots[count - 1].top) + 64 == Int(bitPattern: slots[0].mapping) + slots[0].mapping_size)
    }
}
