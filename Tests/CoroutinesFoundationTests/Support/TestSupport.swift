import Coroutines
import CoroutinesTestSupport
import Foundation
import Synchronization

/// A counter shared between coroutines and threads.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    func increment() { storage.wrappingAdd(1, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}

/// A one-value box shared between threads.
final class Box<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value {
        get { storage.locked { $0 } }
        set { storage.locked { $0 = newValue } }
    }

    /// Changes the value in one locked step (`value.append(x)` would read, then write, and lose
    /// a concurrent change).
    func update(_ change: (inout Value) -> Void) {
        storage.locked { change(&$0) }
    }
}

/// A fresh temporary directory, removed by `remove()`.
struct TemporaryDirectory: Sendable {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("coroutines-foundation-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> URL { url.appendingPathComponent(name) }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// What a suspended coroutine waits in, as `Coroutine.dumpAll()` names it.
enum SuspensionPoint: String, Sendable {
    /// A socket read or accept waiting for data or a connection.
    case readable = "waitUntilReadable"
    /// A socket write waiting for room.
    case writable = "waitUntilWritable"
}

/// `waitUntilSuspended` gave up: the coroutine finished, or did not suspend in time.
struct NotSuspended: Error, CustomStringConvertible {
    let description: String
}

/// Suspends the calling coroutine until `coroutine` is suspended in `point`, that is until
/// `Coroutine.dumpAll()` reports `'name' on scheduler: suspended waiting in <point>` for it: the
/// moment to close, cancel or write under it. `coroutine` needs a name no other test uses.
///
/// Checks after each `yield` (enough when both run on this scheduler), then every millisecond
/// (the coroutine runs on another thread). Throws ``NotSuspended`` if it finishes first or
/// `timeout` passes.
func waitUntilSuspended(_ coroutine: Coroutine, in point: SuspensionPoint,
                        timeout: Duration = hangBound) throws {
    guard let name = coroutine.name else { preconditionFailure("waitUntilSuspended needs a named coroutine") }
    let line = "'\(name)' on \(coroutine.scheduler.name): suspended waiting in \(point.rawValue)"
    let deadline = ContinuousClock.now + timeout
    var checks = 0
    while true {
        let dump = Coroutine.dumpAll()
        if dump.split(separator: "\n").contains(where: { $0.hasPrefix(line) }) { return }
        if coroutine.isFinished { throw NotSuspended(description: "'\(name)' finished before it waited in \(point.rawValue)") }
        if ContinuousClock.now >= deadline {
            throw NotSuspended(description: "'\(name)' not waiting in \(point.rawValue) after \(timeout):\n\(dump)")
        }
        checks += 1
        if checks < 16 { try Coroutine.yield() } else { try Coroutine.delay(.milliseconds(1)) }
    }
}

/// Launches `body` as a coroutine named `name` (on `scheduler`, else this one's) and returns it
/// once it is suspended in `point` (``waitUntilSuspended(_:in:timeout:)``).
func launchUntilSuspended(on scheduler: CoroutineScheduler? = nil, name: String, in point: SuspensionPoint,
                          _ body: @escaping @Sendable () throws -> Void) throws -> Coroutine {
    let coroutine = Coroutine.launch(on: scheduler, name: name, body)
    try waitUntilSuspended(coroutine, in: point)
    return coroutine
}
