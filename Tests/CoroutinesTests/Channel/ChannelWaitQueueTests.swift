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
}
