/// The FIFO run queue of ready coroutines of one scheduler: a power-of-two ring of retained
/// references in manually managed memory, so an enqueue costs one retain and a dequeue hands
/// that reference over (no array uniqueness checks, no optional enum payloads).
///
/// Not thread-safe: confined to its scheduler's thread. The owner calls `deallocate()`.
/// - Complexity: amortised O(1) `append`, O(1) `popFirst`.
struct CoroutineQueue {
    private var buffer: UnsafeMutablePointer<Unmanaged<Coroutine>>
    private var mask: Int
    private var head = 0
    private(set) var count = 0

    init(capacity: Int = 64) {
        var c = 8
        while c < capacity { c <<= 1 }
        buffer = .allocate(capacity: c)
        mask = c - 1
    }

    var isEmpty: Bool { count == 0 }

    /// The head, without removing it and without retaining it.
    var firstUnretained: Unmanaged<Coroutine>? { count == 0 ? nil : buffer[head] }

    /// The head, without removing it.
    /// The coroutine `offset` places behind the head, unretained, or nil.
    func peek(_ offset: Int) -> Unmanaged<Coroutine>? {
        offset < count ? buffer[(head + offset) & mask] : nil
    }

    var first: Coroutine? { count == 0 ? nil : buffer[head].takeUnretainedValue() }

    mutating func append(_ c: __owned Coroutine) {
        if count == mask + 1 { grow() }
        buffer[(head + count) & mask] = .passRetained(c)
        count += 1
    }

    mutating func popFirst() -> Coroutine? {
        guard count > 0 else { return nil }
        let u = buffer[head]
        head = (head + 1) & mask
        count -= 1
        return u.takeRetainedValue()
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

    /// Releases the queued references and the memory.
    mutating func deallocate() {
        while popFirst() != nil {}
        buffer.deallocate()
    }
}
