import CCoroutines
import Foundation
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Stacks mapped and released from several threads at once (<doc:Stacks>).
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Coroutine stacks under races", .serialized)
struct StackStressTests {
    /// Guards an invariant (coloured stacks).
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
}
