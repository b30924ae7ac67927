/// The FIFO ring that a scheduler's own queues are made of: the run queue
/// (``CoroutineQueue``), the pending launches (``PendingLaunchQueue``) and the loop's jobs. A
/// power-of-two ring in manually managed memory: an index wraps with a mask, an element is moved
/// in and moved out (no optional payloads, no array uniqueness checks, no reference counting of
/// its own), and it grows by doubling.
///
/// Two queues of the runtime are not rings of this kind, for stated reasons:
/// - a pool scheduler's ``LaunchQueue`` is read by other threads (stealing), so it is a fixed
///   ring of atomic words with its own protocol;
/// - a channel's buffer belongs to ``ChannelStateMachine``, a value type that is copied (its
///   tests compare states), so it keeps the copy-on-write ``RingBuffer``.
///
/// ## Invariants
/// - The elements are the slots `head, head+1, …, head+count−1`, each modulo `mask + 1`; those
///   slots are initialised and no others are.
/// - `mask + 1` is a power of two, at least 8, and `count ≤ mask + 1`.
///
/// Not thread-safe: each ring is confined to its scheduler's thread. Not copyable: a copy would
/// share the memory. The owner calls ``deallocate()``, which destroys what is still queued.
/// - Complexity: amortised O(1) ``append(_:)`` and ``prepend(_:)``; O(1) ``popFirst()``, ``peek(_:)`` and
///   ``replaceFirst(with:)``.
struct Ring<Element>: ~Copyable {
    private var buffer: UnsafeMutablePointer<Element>
    private var mask: Int
    private var head = 0
    /// How many elements it holds.
    private(set) var count = 0

    /// An empty ring with room for at least `capacity` elements before it grows.
    init(capacity: Int) {
        let c = ringCapacity(atLeast: capacity)
        buffer = .allocate(capacity: c)
        mask = c - 1
    }

    var isEmpty: Bool { count == 0 }

    /// Queues `element` at the back.
    @inline(__always)
    mutating func append(_ element: consuming Element) {
        if count == mask + 1 { grow() }
        (buffer + ((head + count) & mask)).initialize(to: element)
        count += 1
    }

    /// Queues `element` at the front (it is taken off next): a hand-off that runs before what is
    /// queued (``CoroutineScheduler/makeReadyNext(_:)``).
    @inline(__always)
    mutating func prepend(_ element: consuming Element) {
        if count == mask + 1 { grow() }
        head = (head &- 1) & mask
        (buffer + head).initialize(to: element)
        count += 1
    }

    /// Takes the front element off, or nil if the ring is empty.
    @inline(__always)
    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let e = (buffer + head).move()
        head = (head + 1) & mask
        count -= 1
        return e
    }

    /// The element `offset` places behind the front (0: the front), or nil.
    @inline(__always)
    func peek(_ offset: Int) -> Element? {
        offset < count ? buffer[(head + offset) & mask] : nil
    }

    /// Replaces the front element. The ring is not empty.
    @inline(__always)
    mutating func replaceFirst(with element: consuming Element) {
        precondition(count > 0, "internal inconsistency: replacing the front of an empty ring")
        buffer[head] = element
    }

    private mutating func grow() {
        let capacity = (mask + 1) * 2
        let new = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
        for i in 0..<count { (new + i).moveInitialize(from: buffer + ((head + i) & mask), count: 1) }
        buffer.deallocate()
        buffer = new
        mask = capacity - 1
        head = 0
    }

    /// Destroys the elements still queued and frees the memory.
    mutating func deallocate() {
        while count > 0 { _ = popFirst() }
        buffer.deallocate()
    }
}

/// The power of two (at least 8) that a ``Ring`` of `capacity` elements allocates, so that an
/// index wraps with a mask.
func ringCapacity(atLeast capacity: Int) -> Int {
    var c = 8
    while c < capacity { c <<= 1 }
    return c
}
