/// The coroutines and Swift tasks waiting in `join()` for one coroutine (``Coroutine/join()``,
/// `join() async`), inside the coroutine's `SharedState`.
///
/// Push and withdrawal are O(1) (amortised) at any length: coroutine joiners are tickets in a
/// ``WaiterList`` (a cancelled or timed-out joiner is withdrawn at once from a short list, or left
/// as a tombstone that the finish skips), and task joiners are keyed by their id (a cancelled
/// task removes exactly its own entry). Finishing takes the whole queue and wakes everyone in it:
/// coroutines in the order they joined, then tasks (in no particular order; each is resumed as a
/// job of its own executor anyway).
///
/// Invariants: `storage == nil` until the first joiner (a coroutine nobody joins pays one word);
/// `isEmpty` ⇔ no live joiner (a ``WaiterList``'s first entry is never a tombstone, and task
/// entries are removed, never left behind).
///
/// Not thread-safe: read and written only under the coroutine's `sharedLock`.
struct JoinerQueue {
    /// Allocated at the first joiner; a class so that the queue costs one word in every coroutine.
    final class Storage {
        var coroutines = WaiterList<WaitTicket>()
        var tasks: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private(set) var storage: Storage?

    /// Whether no joiner waits. - Complexity: O(1).
    var isEmpty: Bool {
        guard let storage else { return true }
        return storage.coroutines.isEmpty && storage.tasks.isEmpty
    }

    /// Entries held, coroutine tombstones included (tests read it). - Complexity: O(1).
    var count: Int {
        guard let storage else { return 0 }
        return storage.coroutines.entryCount + storage.tasks.count
    }

    private mutating func uniqueStorage() -> Storage {
        if let storage { return storage }
        let s = Storage()
        storage = s
        return s
    }

    /// Queues a coroutine joiner. - Complexity: O(1) amortised.
    mutating func append(_ ticket: WaitTicket) {
        uniqueStorage().coroutines.append(ticket)
    }

    /// Queues a task joiner under `id` (unique: ``JoinerIDs``). - Complexity: O(1) amortised.
    mutating func append(id: UInt64, _ continuation: CheckedContinuation<Void, any Error>) {
        uniqueStorage().tasks[id] = continuation
    }

    /// Withdraws a coroutine joiner whose wait was claimed by its canceller or timeout
    /// (``WaiterList/withdraw(_:)``). - Complexity: O(1) amortised.
    mutating func withdraw(_ ticket: WaitTicket) {
        storage?.coroutines.withdraw(ticket)
    }

    /// Removes and returns the task joiner `id`, if it is still queued. - Complexity: O(1).
    mutating func removeTask(id: UInt64) -> CheckedContinuation<Void, any Error>? {
        storage?.tasks.removeValue(forKey: id)
    }

    /// Takes every joiner out, leaving the queue empty; nil if none waits.
    mutating func takeAll() -> Storage? {
        guard !isEmpty else { return nil }
        defer { storage = nil }
        return storage
    }
}
