import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// Generators under races: hosted by coroutines that finish, are cancelled or suspend inside the
/// generator, and selecting on channels fed from other threads (<doc:Generators>).
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
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

    /// From the tests written against the intrusive wait queues, whose waiter records live on their
    /// coroutines' stacks (ChannelWaiter.swift).
    ///
    /// The limit only detects a hang: alone, the test takes about 0.15 s. Each of its 3,000
    /// values crosses threads (a rendezvous with a feeder on another scheduler), so in the full
    /// parallel suite on two shared cores it waits for the OS to run the woken thread every
    /// time: with the stall monitor off it took 20–24 s there (load average 9–14), and the
    /// former 30 s limit failed it now and then. So the limit is 120 s.
    @Test("generators hosted by a coroutine select on channels fed from other threads and are dropped mid-stream: every value once")
    func generatorsSelecting() async throws {
        try await CK.withSchedulers(2, "wq-gen") { s in
            let a = Channel<Int>(), b = Channel<Int>()
            let n = 1500
            let feeders = [a, b].enumerated().map { (j, ch) in
                Coroutine.launch(on: s[j]) { for i in 0..<n { try ch.send(j * 100_000 + i) } }
            }
            let got = try await Kit.run { () -> [Int] in
                var got: [Int] = []
                var round = 0
                while got.count < 2 * n {
                    round += 1
                    let take = 1 + round % 4
                    let r = round
                    let g = Generator<Int> { yield in
                        while true {
                            let v: Int? = try select { sel in
                                sel.receive(from: a) { $0 }
                                sel.receive(from: b) { $0 }
                                sel.timeout(after: .microseconds(r % 30)) { nil }
                            }
                            if let v { try yield(v) }
                        }
                    }
                    for v in g.prefix(take) { got.append(v) }
                }
                return got
            }
            for f in feeders { try await f.join() }
            #expect(got.filter { $0 < 100_000 } == Array(0..<n))
            #expect(got.filter { $0 >= 100_000 } == Array(100_000..<100_000 + n))
        }
    }
}
