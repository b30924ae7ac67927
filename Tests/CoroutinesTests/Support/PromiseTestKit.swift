import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

// Helpers shared by the promise tests (PromiseTests.swift, PromiseCombinatorTests.swift) and the
// Swift-concurrency bridge tests (ConcurrencyBridgeTests.swift).

enum PromiseTestError: Error, Equatable {
    case boom, other, control
    case code(Int)
}

/// A thread-safe append-only log.
final class PromiseTestLog<Element: Sendable>: Sendable {
    private let storage = Mutex<[Element]>([])
    func append(_ e: Element) { storage.locked { $0.append(e) } }
    var values: [Element] { storage.locked { $0 } }
}

/// A thread-safe flag that is set once.
final class PromiseTestFlag: Sendable {
    private let storage = Atomic<Bool>(false)
    func set() { storage.store(true, ordering: .sequentiallyConsistent) }
    var value: Bool { storage.load(ordering: .sequentiallyConsistent) }
}

func successValue<T>(_ r: Result<T, any Error>?) -> T? {
    if case .success(let v)? = r { return v }
    return nil
}

func failure<T>(_ r: Result<T, any Error>?) -> (any Error)? {
    if case .failure(let e)? = r { return e }
    return nil
}

/// Runs `body` with a fresh dedicated scheduler, stopped afterwards.
func withTestScheduler<R>(_ body: (CoroutineScheduler) async throws -> R) async throws -> R {
    let s = CoroutineScheduler(name: "promise-test")
    defer { s.stop() }
    return try await body(s)
}

/// Runs `body` with `count` fresh dedicated schedulers, stopped afterwards.
func withTestSchedulers<R>(_ count: Int, _ body: ([CoroutineScheduler]) async throws -> R) async throws -> R {
    let schedulers = (0..<count).map { CoroutineScheduler(name: "promise-test-\($0)") }
    defer { for s in schedulers { s.stop() } }
    return try await body(schedulers)
}

/// Runs `body` in a coroutine on `s` and returns its value.
func onScheduler<T: Sendable>(_ s: CoroutineScheduler, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await Coroutine.async(on: s, body).value
}

/// How `p` settled, as text ("value …" or "rejected: …"), or "still pending after ``hangBound``"
/// if it has not settled by then: a hang detector, raced on a pool scheduler and cancelled as
/// soon as `p` settles (so it leaves no coroutine or timer behind).
func outcome<T: Sendable>(of p: Promise<T>) async throws -> String {
    let hang = Coroutine.async { try Coroutine.delay(hangBound); return "still pending after \(hangBound)" }
    defer { hang.cancel() }
    return try await Promise.race([p.then { "value \($0)" }.recover { "rejected: \($0)" }, hang]).value
}

/// Returns once everything queued on `s` before the call (coroutines and jobs) has had its turn.
func flush(_ s: CoroutineScheduler) async throws {
    try await Coroutine.async(on: s) {}.value
}

/// Where the calling code runs, for observer tests.
func currentPlace() -> String {
    let pool = SchedulerPool.default(for: .default).schedulers
    let scheduler = CoroutineScheduler.current.map { s in pool.contains { $0 === s } ? "pool scheduler" : s.name } ?? "no scheduler"
    return "\(scheduler), \(Coroutine.current == nil ? "no coroutine" : "in a coroutine")"
}

/// Polls `condition` (for states that have no signal of their own, such as "a waiter is
/// registered"); records an issue and throws if it does not hold within ``hangBound``.
func waitUntil(_ what: String, sourceLocation: SourceLocation = #_sourceLocation,
               _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + hangBound
    while ContinuousClock.now < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(1))
    }
    Issue.record("timed out waiting until \(what)", sourceLocation: sourceLocation)
    throw PromiseTestError.other
}

extension Promise {
    /// The number of live waiters (coroutines, tasks, observers) registered on this promise:
    /// withdrawn tasks' tombstones are not counted.
    /// Mirrors `PromiseStateMachine`'s storage: update it when that layout changes.
    var testWaiterCount: Int {
        withState { s in
            var n = s.others.count - Int(s.withdrawnTasks)
            s.coroutines.forEach { _ in n += 1 }
            return n
        }
    }

    /// Entries in the list of task and observer waiters, withdrawn tasks' tombstones included.
    var testOtherEntryCount: Int { withState { $0.others.count } }

    /// The list of task and observer waiters as the state holds it: how many entries are
    /// observers, tasks still waiting (holding a resumption) and tombstones (a withdrawn task's
    /// entry, holding none), in list order as letters ("o", "t", "x"), and the state's own count
    /// of tombstones.
    var testOtherEntries: (layout: String, withdrawnTasks: Int) {
        withState { s in
            let layout = s.others.map { w -> String in
                switch w {
                case .observer: "o"
                case .task(let wait): wait.resume == nil ? "x" : "t"
                }
            }.joined()
            return (layout, Int(s.withdrawnTasks))
        }
    }
}
