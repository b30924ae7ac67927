import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

/// Small helpers shared by the runtime tests (launch, cancellation, misuse, scheduler, stack).
///
/// Everything lives in this namespace so that it cannot collide with helpers of other test files
/// in the same target.
enum CoroutineTestKit {
    /// The kernel id of the calling thread (gettid on Linux).
    static func threadID() -> UInt64 { ccoro_thread_id() }

    /// Runs `body` on a new plain Foundation `Thread` (not a Swift concurrency thread, not a
    /// scheduler) and returns its value to the awaiting task.
    static func onPlainThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (k: CheckedContinuation<T, any Error>) in
            let thread = Thread { k.resume(with: Result { try body() }) }
            thread.start()
        }
    }

    /// Runs `body(index)` on `count` plain threads at once and waits for all of them.
    static func onPlainThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<count {
                group.addTask { try await onPlainThread { body(i) } }
            }
            try await group.waitForAll()
        }
    }

    /// Runs `body` as a job on `scheduler`'s loop: on its thread, outside any coroutine.
    static func onSchedulerLoop<T: Sendable>(_ scheduler: CoroutineScheduler,
                                             _ body: @escaping @Sendable () -> T) async throws -> T {
        let p = Promise<T>()
        scheduler.execute { p.fulfill(body()) }
        return try await p.value
    }

    /// Creates a dedicated scheduler for one test and stops it afterwards.
    static func withScheduler<T>(_ name: String,
                                 _ body: (CoroutineScheduler) async throws -> T) async throws -> T {
        let s = CoroutineScheduler(name: name)
        defer { s.stop() }
        return try await body(s)
    }

    /// `Coroutine.run` with a hang detector: if the body has not finished after `limit`, records
    /// an issue listing what still runs on its scheduler (`dumpAll()`), then keeps posting no-op
    /// jobs to that scheduler, so that a loop that parked while it still had work gets woken and
    /// the test fails instead of hanging the whole run.
    ///
    /// `limit` stands for "this hangs", never for "this is slow": it is many times the normal
    /// time. The detector watches the body, not the `await`: a body that finished while the
    /// awaiting task waited for a Swift concurrency thread (the parallel suite keeps both busy
    /// at times) is not a hang. The default is ``hangBound``: under ThreadSanitizer, in the full
    /// parallel suite on 2 CPUs, a body of 50 actor requesters took about 58 s.
    static func run<T: Sendable>(limit: Duration = hangBound,
                                 sourceLocation: SourceLocation = #_sourceLocation,
                                 _ body: @escaping @Sendable () throws -> T) async throws -> T {
        let scheduler = Box<CoroutineScheduler?>(nil)
        let ended = Atomic<Bool>(false)
        let watchdog = startWatchdog(limit: limit, "Coroutine.run", waking: scheduler,
                                     unless: { ended.load(ordering: .acquiring) }, sourceLocation: sourceLocation)
        defer { watchdog.cancel() }
        return try await Coroutine.run {
            scheduler.value = Coroutine.current?.scheduler
            defer { ended.store(true, ordering: .releasing) }
            return try body()
        }
    }

    /// After `limit`, unless `finished()` holds by then, records an issue naming `what` with the
    /// coroutines still live on `scheduler`, and pokes `scheduler` every 50 ms until cancelled.
    static func startWatchdog(limit: Duration, _ what: String, waking scheduler: Box<CoroutineScheduler?>,
                              unless finished: @escaping @Sendable () -> Bool = { false },
                              sourceLocation: SourceLocation = #_sourceLocation) -> Task<Void, Never> {
        Task {
            do { try await Task.sleep(for: limit) } catch { return }
            if finished() { return }
            Issue.record("\(what) hangs: not finished after \(limit). Still live:\n\(liveReport(on: scheduler.value))",
                         sourceLocation: sourceLocation)
            while !Task.isCancelled {
                scheduler.value?.execute {}
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// The lines of `Coroutine.dumpAll()` for `scheduler` (all of it if `scheduler` is nil),
    /// at most 50 of them.
    static func liveReport(on scheduler: CoroutineScheduler?) -> String {
        let lines = Coroutine.dumpAll().split(separator: "\n")
            .filter { line in scheduler.map { line.contains(" on \($0.name):") } ?? true }
        let shown = lines.prefix(50).joined(separator: "\n")
        return lines.count > 50 ? shown + "\n… and \(lines.count - 50) more" : (lines.isEmpty ? "nothing" : shown)
    }

    /// Polls `condition` every millisecond until it holds or `timeout` passes. Only for states
    /// that have no signal to wait on (for example a scheduler thread having ended).
    static func eventually(timeout: Duration = hangBound, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    /// A thread-safe, append-only record of steps.
    final class Log<Element: Sendable>: Sendable {
        private let items = Mutex<[Element]>([])
        init() {}
        func append(_ e: Element) { items.locked { $0.append(e) } }
        var all: [Element] { items.locked { $0 } }
    }

    /// A thread-safe counter.
    final class Counter: Sendable {
        private let storage = Atomic<Int>(0)
        init() {}
        @discardableResult
        func increment() -> Int { storage.wrappingAdd(1, ordering: .relaxed).newValue }
        var value: Int { storage.load(ordering: .relaxed) }
    }

    /// Per-index counters shared between threads (how often each of `n` things happened).
    final class Tally: Sendable {
        private let counts: Mutex<[Int]>
        init(_ n: Int) { counts = Mutex(Array(repeating: 0, count: n)) }
        func bump(_ i: Int) { counts.locked { $0[i] += 1 } }
        var all: [Int] { counts.locked { $0 } }
        var total: Int { counts.locked { $0.reduce(0, +) } }
    }

    /// A thread-safe slot written once or more, read later.
    final class Box<Value: Sendable>: Sendable {
        private let storage: Mutex<Value>
        init(_ value: Value) { storage = Mutex(value) }
        var value: Value {
            get { storage.locked { $0 } }
            set { storage.locked { $0 = newValue } }
        }
    }

    /// Counts its own deinitialisations in `released` (a captured value freed exactly once).
    final class Tracker: Sendable {
        let released: Counter
        init(_ released: Counter) { self.released = released }
        deinit { released.increment() }
    }

    /// Weak references to coroutines: none may stay alive once everything finished (a leak),
    /// and under ASan none may be used after it was freed.
    final class WeakCoroutines: Sendable {
        private final class Ref: @unchecked Sendable { weak var c: Coroutine?; init(_ c: Coroutine) { self.c = c } }
        private let refs = Mutex<[Ref]>([])
        func add(_ c: Coroutine) { refs.locked { $0.append(Ref(c)) } }
        var alive: Int { refs.locked { $0.filter { $0.c != nil }.count } }
        var count: Int { refs.locked { $0.count } }
    }

    /// A function that the optimiser cannot see through.
    @inline(never)
    static func opaque<T>(_ x: T) -> T { x }

    /// Makes a pipe; both ends are non-blocking.
    static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw POSIXError(.EMFILE) }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        return (fds[0], fds[1])
    }

    /// Writes into a non-blocking pipe until it is full (so the write end is not writable).
    static func fill(pipeWriteEnd fd: Int32) {
        var chunk = [UInt8](repeating: 0x2A, count: 4096)
        while chunk.withUnsafeMutableBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
}

// MARK: - Coroutine.async launches and their outcomes

extension CoroutineTestKit {
    /// An error thrown on purpose, to tell it apart from the library's errors.
    struct Boom: Error, Equatable {}

    /// The same, numbered: which of many bodies threw it.
    struct NumberedBoom: Error, Equatable { let n: Int }

    /// The outcome of a promise as a short string, for comparisons: "pending", "value …",
    /// "cancelled", "timedOut", "stopped" (`schedulerStopped`), "boom …" for ``Boom`` and
    /// ``NumberedBoom`` (its number), "error …" for anything else.
    static func describe<T>(_ r: Result<T, any Error>?) -> String {
        switch r {
        case nil: "pending"
        case .success(let v): "value \(v)"
        case .failure(let e) where e is CancellationError: "cancelled"
        case .failure(CoroutineError.timedOut): "timedOut"
        case .failure(CoroutineError.schedulerStopped): "stopped"
        case .failure(let e as NumberedBoom): "boom \(e.n)"
        case .failure(let e as Boom): "boom \(e)"
        case .failure(let e): "error \(e)"
        }
    }

    /// `Coroutine.async`, lazily created (name nil) or created at once (a name): everything must
    /// look as if the coroutine had been created at launch, which is what the call with a `name:`
    /// (never lazy) does, so several tests run both forms side by side.
    static func spawn<T: Sendable>(eager: Bool, on s: CoroutineScheduler? = nil,
                                   _ body: @escaping @Sendable () throws -> T) -> Promise<T> {
        Coroutine.async(on: s, name: eager ? "eager" : nil, body)
    }

    /// A fan-out of `Coroutine.async` launches `depth` levels deep, `fan` at each level; returns
    /// how many coroutines ran (111,111 for depth 5, fan 10).
    static func tree(depth: Int, fan: Int) throws -> Int {
        if depth == 0 { return 1 }
        let ps = (0..<fan).map { _ in Coroutine.async { try tree(depth: depth - 1, fan: fan) } }
        return try ps.reduce(1) { try $0 + $1.await() }
    }
}

extension Promise {
    /// The settlement, awaited from a task.
    var valueResult: Result<Value, any Error> {
        get async {
            do { return .success(try await value) } catch { return .failure(error) }
        }
    }
}
