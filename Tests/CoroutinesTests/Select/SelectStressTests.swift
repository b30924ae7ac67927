import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// select under races: cases on the same channels as peers on other threads, `close`,
/// cancellation and timeouts (<doc:ChannelsAndSelect>).
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("select under races", .serialized)
struct SelectStressTests {
    /// Found in review 10 (`close` chains the claimed records of the waiters it wakes).
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
}
