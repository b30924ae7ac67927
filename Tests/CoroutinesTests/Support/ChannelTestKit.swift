import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

/// Helpers shared by the channel, select, sync-primitive and produce tests.
enum ChannelTestKit {
    /// An error of our own, to tell it apart from the library's errors.
    struct Failure: Error, Equatable { var code: Int }

    /// Raised by the helpers when a coroutine did not reach the expected state.
    struct HelperFailure: Error, CustomStringConvertible { var description: String }

    /// A short, comparable name for an error (used in logs compared with `#expect`).
    static func label(_ error: any Error) -> String {
        if let e = error as? ChannelError, e == .closed { return "closed" }
        if error is CancellationError { return "cancelled" }
        if let e = error as? CoroutineError {
            switch e {
            case .notInCoroutine: return "notInCoroutine"
            case .timedOut: return "timedOut"
            default: return "CoroutineError.\(e)"
            }
        }
        if let f = error as? Failure { return "failure \(f.code)" }
        return "other: \(error)"
    }

    /// Runs `body` and returns "ok" or the label of what it threw.
    static func outcome(_ body: () throws -> Void) -> String {
        do { try body(); return "ok" } catch { return label(error) }
    }

    /// Runs `body` and returns its value's description or the label of what it threw.
    static func result<T>(_ body: () throws -> T) -> String {
        do { return "\(try body())" } catch { return label(error) }
    }

    /// Waits (inside a coroutine) until `c` is suspended, that is, blocked in a suspending
    /// operation with its waiter registered. On the caller's own scheduler it yields, which is
    /// deterministic; for a coroutine on another scheduler it polls every millisecond.
    static func waitUntilSuspended(_ c: Coroutine, limit: Duration = hangBound) throws {
        let deadline = ContinuousClock.now + limit
        while c.status != .suspended {
            if c.isFinished { throw HelperFailure(description: "\(c) finished instead of blocking: \(String(describing: c.error))") }
            if ContinuousClock.now > deadline { throw HelperFailure(description: "\(c) did not block within \(limit)") }
            if c.scheduler === Coroutine.current?.scheduler { try Coroutine.yield() } else { try Coroutine.delay(.milliseconds(1)) }
        }
    }

    static func waitUntilSuspended(_ cs: [Coroutine]) throws {
        for c in cs { try waitUntilSuspended(c) }
    }

    /// The armed timers of the scheduler running the calling coroutine (read on its own thread).
    static func armedTimers() -> Int { Coroutine.current!.scheduler.timers.count }

    /// Drains a channel without suspending: values until `tryReceive` returns nil or throws.
    static func drain<T>(_ ch: Channel<T>) -> (values: [T], end: String) {
        var values: [T] = []
        while true {
            do {
                guard let v = try ch.tryReceive() else { return (values, "empty") }
                values.append(v)
            } catch {
                return (values, label(error))
            }
        }
    }

    /// `count` dedicated schedulers, stopped by `body`'s end.
    static func withSchedulers<T>(_ count: Int, _ name: String,
                                  _ body: ([CoroutineScheduler]) async throws -> T) async throws -> T {
        let schedulers = (0..<count).map { CoroutineScheduler(name: "\(name)-\($0)") }
        defer { for s in schedulers { s.stop() } }
        return try await body(schedulers)
    }

    /// Counts its creations and deinitialisations (values that a select must destroy exactly once).
    final class Item: Sendable {
        let id: Int
        let destroyed: CoroutineTestKit.Counter
        init(_ id: Int, _ created: CoroutineTestKit.Counter, _ destroyed: CoroutineTestKit.Counter) {
            self.id = id
            self.destroyed = destroyed
            created.increment()
        }
        deinit { destroyed.increment() }
    }
}

/// The capacities most tests run at.
enum TestCapacity: Sendable, CustomTestStringConvertible, CaseIterable {
    case rendezvous, one, five, unbounded

    var capacity: Channel<Int>.Capacity {
        switch self {
        case .rendezvous: 0
        case .one: 1
        case .five: .bounded(5)
        case .unbounded: .unbounded
        }
    }

    /// How many sends complete without a receiver.
    var room: Int {
        switch self {
        case .rendezvous: 0
        case .one: 1
        case .five: 5
        case .unbounded: Int.max
        }
    }

    var testDescription: String {
        switch self {
        case .rendezvous: "capacity 0"
        case .one: "capacity 1"
        case .five: "capacity 5"
        case .unbounded: "unbounded"
        }
    }

    static let bounded: [TestCapacity] = [.rendezvous, .one, .five]
}
