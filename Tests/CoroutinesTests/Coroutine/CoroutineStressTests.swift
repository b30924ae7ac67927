import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Coroutines under races and at scale: launches, cancellation, joins and lifetimes across
/// threads, and tens of thousands of launches (<doc:CoroutineLifecycle>, <doc:Cancellation>).
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("Coroutines under races and at scale", .serialized)
struct CoroutineStressTests {
    // MARK: Lifetimes

    /// Found in review 10 (the run queue holds no references to its coroutines).
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
}
