/// The registry: every coroutine admitted to this scheduler and not yet finished, in an
/// intrusive doubly linked list. It keeps each one alive (one reference per entry) and lets
/// `cancelAll` and `dumpAll()` find them. Any thread, under `registryLock`.
///
/// Invariants:
/// * An entry is linked from `register` until `unlink`; new entries go in at the head.
/// * `registryLock` is held only for O(1) steps, or for at most ``walkChunk`` entries of a walk:
///   launches from other threads take it (`register`), so a walk of a million coroutines must
///   not hold it for milliseconds. A walk (``liveCoroutines()``) visits the list in chunks and
///   releases the lock between them; between chunks its position is `walkCursor`, the next entry
///   to visit, which `unlink` moves on when it removes that entry. Walks are serialised by
///   `registryWalkLock`, so there is one cursor.
/// * A walk visits every entry linked when it began and still linked when its cursor reaches it;
///   entries registered meanwhile are at the head, behind the cursor, and are not visited.
extension CoroutineScheduler {
    /// The head of the list, its length, and the position of the walk in progress.
    struct Registry {
        var head: Unmanaged<Coroutine>?
        var count = 0
        /// The next entry the walk in progress visits; nil when none is in progress or it has
        /// reached the end.
        var walkCursor: Unmanaged<Coroutine>?
    }

    /// Entries a walk visits per hold of `registryLock` (a retain and an append each: a few
    /// microseconds per chunk).
    static let walkChunk = 256

    /// Runs `body` with the registry, holding `registryLock`. Never suspend or call user code
    /// inside. (As `Coroutine.withShared`: the state is touched only after `lock()`.)
    @inline(__always)
    func withRegistry<R>(_ body: (inout Registry) throws -> R) rethrows -> R {
        registryLock.lock()
        defer { registryLock.unlock() }
        return try body(&registryState)
    }

    /// Links `entry` into the registry, which keeps its reference (+1).
    func register(_ entry: Unmanaged<Coroutine>) {
        withRegistry { r in
            entry._withUnsafeGuaranteedRef { $0.registryNext = r.head }
            r.head?._withUnsafeGuaranteedRef { $0.registryPrevious = entry }
            r.head = entry
            r.count += 1
        }
    }

    /// Removes `c` from the registry and gives back the registry's reference (often the last
    /// one). The caller must own a reference of its own to `c` for the duration of the call.
    func unregister(_ c: Coroutine) {
        if unlink(c) { Unmanaged.passUnretained(c).release() }
    }

    /// Removes `c` from the registry, keeping the registry's reference for the caller to give
    /// back. Returns false if `c` was not linked (then there is no reference to give back).
    func unlink(_ c: Coroutine) -> Bool {
        withRegistry { r in
            let (previous, next) = (c.registryPrevious, c.registryNext)
            let me = Unmanaged.passUnretained(c).toOpaque()
            guard previous != nil || r.head?.toOpaque() == me else { return false }
            if r.walkCursor?.toOpaque() == me { r.walkCursor = next }
            if let previous { previous._withUnsafeGuaranteedRef { $0.registryNext = next } } else { r.head = next }
            next?._withUnsafeGuaranteedRef { $0.registryPrevious = previous }
            c.registryNext = nil
            c.registryPrevious = nil
            r.count -= 1
            return true
        }
    }

    /// How many coroutines are live (admitted and not yet finished). Any thread.
    var liveCount: Int { withRegistry { $0.count } }

    /// The coroutines in the registry (admitted and not yet finished), newest first, retained so
    /// that they can be used after the registry's lock is released. Any thread.
    ///
    /// Walks the list in chunks of ``walkChunk`` entries, releasing `registryLock` between them
    /// (see the invariants above): a coroutine launched during the walk is not listed, one that
    /// finishes during it may or may not be.
    /// - Complexity: O(live coroutines); the lock is held O(``walkChunk``) at a time.
    /// - Parameters (for tests): `chunk`, the entries per hold; `betweenChunks`, run between two
    ///   holds, with the lock released.
    func liveCoroutines(chunk: Int = walkChunk, betweenChunks: () -> Void = {}) -> [Coroutine] {
        registryWalkLock.lock()
        defer { registryWalkLock.unlock() }
        var all: [Coroutine] = []
        all.reserveCapacity(withRegistry { r in
            r.walkCursor = r.head
            return r.count
        })
        while true {
            let more = withRegistry { r -> Bool in
                var c = r.walkCursor
                var visited = 0
                while let x = c, visited < chunk {
                    all.append(x.takeUnretainedValue())
                    c = x._withUnsafeGuaranteedRef { $0.registryNext }
                    visited += 1
                }
                r.walkCursor = c
                return c != nil
            }
            if !more { return all }
            betweenChunks()
            registryLock.pauseForWaiters()
        }
    }
}
