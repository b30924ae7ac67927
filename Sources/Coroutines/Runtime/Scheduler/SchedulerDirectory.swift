import Synchronization

/// Every scheduler that can still run coroutines, for `Coroutine.dumpAll()`.
///
/// Holds strong references (a weak reference would give every scheduler a side table and make
/// each of its retains and releases take the slow path); a scheduler leaves when it stops.
final class SchedulerDirectory: Sendable {
    static let shared = SchedulerDirectory()
    private let entries = Mutex<[CoroutineScheduler]>([])

    func add(_ s: CoroutineScheduler) {
        entries.locked { $0.append(s) }
    }

    func remove(_ s: CoroutineScheduler) {
        entries.locked { $0.removeAll { $0 === s } }
    }

    var all: [CoroutineScheduler] { entries.locked { $0 } }
}
