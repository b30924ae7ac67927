import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Generators under races: hosted by coroutines that finish, are cancelled or suspend inside the
/// generator, and selecting on channels fed from other threads (<doc:Generators>).
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("Generators under races", .serialized)
struct GeneratorStressTests {
    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("generators run inside coroutines that finish, are cancelled and suspend inside the generator")
    func generatorsInsideCoroutines() async throws {
        let weak = Kit.WeakCoroutines()
        let released = Kit.Counter()
        let created = Kit.Counter()
        try await Kit.withScheduler("gen") { s in
            let cs = (0..<100).map { i in
                Coroutine.launch(on: s) {
                    created.increment()
                    let t = Kit.Tracker(released)
                    let g = Generator<Int> { yield in
                        _ = t
                        for k in 0..<10 {
                            try Coroutine.yield()        // suspends the host coroutine from the generator's stack
                            if k == 5 && i % 2 == 0 { try Coroutine.delay(.milliseconds(1)) }
                            try yield(k)
                        }
                    }
                    var sum = 0
                    for v in g { sum += v; if i % 3 == 0 && v == 3 { break } }
                    // A coroutine cancelled while it runs ends its generator early with
                    // CancellationError; otherwise the generator ran to the end.
                    if g.error != nil { precondition(g.error is CancellationError && Coroutine.current!.isCancelled) }
                    else if i % 3 != 0 { precondition(sum == 45) }
                }
            }
            for c in cs { weak.add(c) }
            // Cancel some while they run.
            for c in cs where c.hashValue % 4 == 0 { c.cancel() }
            try await Kit.run { for c in cs { try c.join() } }
        }
        #expect(created.value > 0)
        #expect(await Kit.eventually { released.value == created.value }, "\(released.value) of \(created.value) released")
        #expect(await Kit.eventually { weak.alive == 0 })
    }
}
