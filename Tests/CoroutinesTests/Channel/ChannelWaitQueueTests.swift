import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// The intrusive FIFO of channel waiter records (ChannelWaiter.swift): order, O(1) removal from
/// any position, and removal of a record that a waker already popped.
@Suite("Channel wait queue")
struct ChannelWaitQueueTests {
    /// Runs `body` with `count` waiter records (of the current coroutine, epochs 1, 3, …),
    /// which it identifies by their `caseIndex` (0, 1, …).
    private static func withRecords<R: Sendable>(_ count: Int,
                                                 _ body: @escaping @Sendable (UnsafeMutablePointer<ChannelWaiter>) -> R) async throws -> R {
        try await Kit.run {
            let c = Coroutine.current!
            var outcome = WaitOutcome()
            return withUnsafeMutablePointer(to: &outcome) { outcome in
                let records = UnsafeMutablePointer<ChannelWaiter>.allocate(capacity: count)
                defer { records.deinitialize(count: count); records.deallocate() }
                for i in 0..<count {
                    (records + i).initialize(to: ChannelWaiter(coroutine: Unmanaged.passUnretained(c), epoch: UInt64(2 * i + 1),
                                                               element: UnsafeMutableRawPointer(outcome), outcome: outcome,
                                                               caseIndex: i))
                }
                return body(records)
            }
        }
    }

    private static func drain(_ q: inout ChannelWaitQueue) -> [Int] {
        var order: [Int] = []
        while let w = q.popFirst() {
            #expect(!q.contains(w))
            order.append(w.pointee.caseIndex)
        }
        #expect(q.isEmpty)
        return order
    }

    @Test("records come out in the order they were appended")
    func fifo() async throws {
        let order = try await Self.withRecords(5) { r in
            var q = ChannelWaitQueue()
            for i in 0..<5 { q.append(r + i) }
            return Self.drain(&q)
        }
        #expect(order == [0, 1, 2, 3, 4])
    }

    @Test("removing the first, a middle and the last record keeps the others in order",
          arguments: [[0], [2], [4], [0, 4], [1, 2, 3], [0, 1, 2, 3, 4]])
    func removeAnywhere(_ removed: [Int]) async throws {
        let order = try await Self.withRecords(5) { r in
            var q = ChannelWaitQueue()
            for i in 0..<5 { q.append(r + i) }
            for i in removed { q.remove(r + i) }
            for i in removed where q.contains(r + i) { return [-1] }
            return Self.drain(&q)
        }
        #expect(order == (0..<5).filter { !removed.contains($0) })
    }

    @Test("removing a record that was popped, or removed already, changes nothing")
    func removeAfterPop() async throws {
        let order = try await Self.withRecords(3) { r in
            var q = ChannelWaitQueue()
            for i in 0..<3 { q.append(r + i) }
            let first = q.popFirst()!
            q.remove(first)        // a waiter withdrawing after a waker popped (and skipped) it
            q.remove(r + 1)
            q.remove(r + 1)
            return [first.pointee.caseIndex] + Self.drain(&q)
        }
        #expect(order == [0, 2])
    }

    @Test("a record can be queued again after it left, and the queue works after emptying")
    func requeue() async throws {
        let order = try await Self.withRecords(2) { r in
            var q = ChannelWaitQueue()
            q.append(r)
            q.remove(r)
            #expect(q.isEmpty)
            q.append(r + 1)
            q.append(r)
            return Self.drain(&q)
        }
        #expect(order == [1, 0])
    }

    /// Guards an invariant (the wait queue caches its head record's coroutine).
    @Test("ChannelWaitQueue: headCoroutine is the head record's coroutine after every append, pop and remove")
    func headCoroutineInvariant() throws {
        let s = CoroutineScheduler(name: "ids")
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

    /// Guards an invariant (`close` chains the claimed records of the waiters it wakes).
    @Test("ChannelStateMachine.close chains only claimed records, receivers then senders, and leaves none linked")
    func closeChainsClaimedRecords() throws {
        let s = CoroutineScheduler(name: "chain")
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
}
