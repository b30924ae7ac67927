/// The registry: every coroutine admitted to this scheduler and not yet finished, in an
/// intrusive doubly linked list. It keeps each one alive (one reference per entry) and lets
/// `cancelAll` and `dumpAll()` find them. Any thread, under `registryLock`.
extension CoroutineScheduler {
    /// The head of the list and its length.
    struct Registry {
        var head: Unmanaged<Coroutine>?
        var count = 0
    }

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
            guard previous != nil || r.head?.toOpaque() == Unmanaged.passUnretained(c).toOpaque() else { return false }
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
    /// - Complexity: O(live coroutines).
    func liveCoroutines() -> [Coroutine] {
        withRegistry { r in
            var all: [Coroutine] = []
            all.reserveCapacity(r.count)
            var c = r.head
            while let x = c {
                all.append(x.takeUnretainedValue())
                c = x._withUnsafeGuaranteedRef { $0.registryNext }
            }
            return all
        }
    }
}
