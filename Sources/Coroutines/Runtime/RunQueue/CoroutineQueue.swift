/// The FIFO run queue of ready coroutines of one scheduler: a power-of-two ring of unretained
/// references in manually managed memory (no reference counting, no array uniqueness checks, no
/// optional enum payloads).
///
/// An entry may also be ``CoroutineScheduler/launchMarker``, standing for the oldest
/// ``PendingLaunch`` (no coroutine yet); ``CoroutineScheduler/popRunnable()`` creates that
/// coroutine when it takes the marker off, so that no other code sees one.
///
/// - Invariant: every queued coroutine is in its scheduler's registry, whose reference keeps it
///   alive: a coroutine is queued when admitted (registered first) or made ready (suspended, so
///   not finished), and leaves the registry only when reaped after it finished, or through
///   `finishUnstarted` after it was taken off this queue. So the queue needs no reference of
///   its own, and taking a coroutine off it costs no release on a long-cold object.
///
/// Not thread-safe: confined to its scheduler's thread. The owner calls `deallocate()`.
/// - Complexity: amortised O(1) `append`, O(1) `popFirst` and `peek(_:)`.
struct CoroutineQueue {
    private var buffer: UnsafeMutablePointer<Unmanaged<Coroutine>>
    private var mask: Int
    private var head = 0
    private(set) var count = 0

    init(capacity: Int = 64) {
        let c = ringCapacity(atLeast: capacity)
        buffer = .allocate(capacity: c)
        mask = c - 1
    }

    var isEmpty: Bool { count == 0 }

    /// The coroutine `offset` places behind the head (0: the head), or nil.
    func peek(_ offset: Int) -> Unmanaged<Coroutine>? {
        offset < count ? buffer[(head + offset) & mask] : nil
    }

    /// Queues `c` at the back. The caller guarantees the invariant above.
    mutating func append(_ c: Unmanaged<Coroutine>) {
        if count == mask + 1 { grow() }
        buffer[(head + count) & mask] = c
        count += 1
    }

    /// Replaces the head (a pending launch's marker by its coroutine). The queue is not empty.
    mutating func replaceFirst(with c: Unmanaged<Coroutine>) {
        precondition(count > 0, "internal inconsistency: replacing the head of an empty run queue")
        buffer[head] = c
    }

    mutating func popFirst() -> Unmanaged<Coroutine>? {
        guard count > 0 else { return nil }
        let u = buffer[head]
        head = (head + 1) & mask
        count -= 1
        return u
    }

    private mutating func grow() {
        let capacity = (mask + 1) * 2
        let new = UnsafeMutablePointer<Unmanaged<Coroutine>>.allocate(capacity: capacity)
        for i in 0..<count { new[i] = buffer[(head + i) & mask] }
        buffer.deallocate()
        buffer = new
        mask = capacity - 1
        head = 0
    }

    /// Frees the memory (the queued coroutines belong to the registry).
    mutating func deallocate() {
        buffer.deallocate()
    }
}

extension Unmanaged where Instance == Coroutine {
    /// Whether this run-queue entry is ``CoroutineScheduler/launchMarker`` (not a coroutine).
    @inline(__always)
    var isLaunchMarker: Bool { toOpaque() == CoroutineScheduler.launchMarker.toOpaque() }
}

/// The power of two (at least 8) that a manually managed ring of `capacity` elements allocates,
/// so that an index wraps with a mask.
func ringCapacity(atLeast capacity: Int) -> Int {
    var c = 8
    while c < capacity { c <<= 1 }
    return c
}
