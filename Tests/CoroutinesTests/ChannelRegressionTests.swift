import Foundation
import Synchronization
import Testing
@testable import Coroutines

/// Defects found by review, each with the test that failed before its fix.
@Suite("Channel regressions")
struct ChannelRegressionTests {
    /// Counts live instances, to catch leaked or doubly released channel values.
    final class Live: Sendable {
        let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .sequentiallyConsistent) }
    }

    final class Tracked: Sendable {
        let live: Live
        init(_ live: Live) {
            self.live = live
            live.count.wrappingAdd(1, ordering: .sequentiallyConsistent)
        }
        deinit { live.count.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
    }

    enum Loser: CaseIterable, Sendable { case receiveWins, otherSendWins, timeoutWins, cancelled }

    @Test("a select's send case that does not win leaves no copy of its value alive", arguments: Loser.allCases)
    func losingSendCaseReleasesItsValue(_ loser: Loser) async throws {
        let live = Live()
        try await CoroutineTestKit.run {
            let out = Channel<Tracked>(), other = Channel<Tracked>(), input = Channel<Int>()
            let selecting = Coroutine.launch {
                _ = try? select { s in
                    s.send(Tracked(live), to: out) { "sent" }
                    switch loser {
                    case .receiveWins: s.receive(from: input) { _ in "received" }
                    case .otherSendWins: s.send(Tracked(live), to: other) { "other" }
                    case .timeoutWins: s.timeout(after: .milliseconds(5)) { "timeout" }
                    case .cancelled: break
                    }
                }
            }
            try ChannelTestKit.waitUntilSuspended(selecting)
            switch loser {
            case .receiveWins: try input.send(7)
            case .otherSendWins: _ = try other.receive()
            case .timeoutWins: break
            case .cancelled: selecting.cancel()
            }
            try selecting.join()
        }
        #expect(live.value == 0)
    }

    @Test("withTimeout around `for x in channel` throws timedOut although the loop swallowed it")
    func withTimeoutAroundIterator() async throws {
        let outcome = try await CoroutineTestKit.run { () -> String in
            let channel = Channel<Int>()                  // never closed
            do {
                return try Coroutine.withTimeout(.milliseconds(20)) { () -> String in
                    var n = 0
                    for _ in channel { n += 1 }
                    return "loop ended normally after \(n) values"
                }
            } catch CoroutineError.timedOut {
                return "timedOut"
            }
        }
        #expect(outcome == "timedOut")
    }

    /// The race between completion and a timeout, as <doc:Cancellation> states it.
    @Test("a receive that completed as its timeout fired still returns its value")
    func completedReceiveInExpiredScopeKeepsItsValue() async throws {
        // The value is handed over before the scope's deadline passes; the body then spins past
        // the deadline without suspending: withTimeout returns the value.
        let value = try await CoroutineTestKit.run { () -> Int in
            let channel = Channel<Int>(capacity: 1)
            try channel.send(5)
            return try Coroutine.withTimeout(.milliseconds(5)) { () -> Int in
                let v = try channel.receive()
                let end = ContinuousClock.now + .milliseconds(10)
                while ContinuousClock.now < end {}
                return v
            }
        }
        #expect(value == 5)
    }
}
