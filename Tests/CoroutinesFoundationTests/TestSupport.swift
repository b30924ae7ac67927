import Coroutines
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
