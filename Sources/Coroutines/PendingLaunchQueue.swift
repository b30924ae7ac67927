/// The FIFO of a scheduler's ``PendingLaunch``es: a power-of-two ring in manually managed memory,
/// as ``CoroutineQueue`` (no optional payloads, no array uniqueness checks; a launch is moved in
/// and moved out).
///
/// Not thread-safe: confined to its scheduler's thread. The owner calls `deallocate()`.
/// - Complexity: amortised O(1) `append`, O(1) `popFirst`.
struct PendingLaunchQueue {
    private var buffer: UnsafeMutablePointer<PendingLaunch>
    private var mask: Int
    private var head = 0
    private(set) var count = 0

    init(capacity: Int = 16) {
        var c = 8
        while c < capacity { c <<= 1 }
        buffer = .allocate(capacity: c)
        mask = c - 1
    }

    mutating func append(_ launch: consuming PendingLaunch) {
        if count == mask + 1 { grow() }
        (buffer + ((head + count) & mask)).initialize(to: launch)
        count += 1
    }

    /// The oldest launch, moved out. The queue is not empty.
    mutating func popFirst() -> PendingLaunch {
        precondition(count > 0, "internal inconsistency: a launch marker without a pending launch")
        let launch = (buffer + head).move()
        head = (head + 1) & mask
        count -= 1
        return launch
    }

    private mutating func grow() {
        let capacity = (mask + 1) * 2
        let new = UnsafeMutablePointer<PendingLaunch>.allocate(capacity: capacity)
        for i in 0..<count { (new + i).moveInitialize(from: buffer + ((head + i) & mask), count: 1) }
        buffer.deallocate()
        buffer = new
        mask = capacity - 1
        head = 0
    }

    /// Frees the memory. Launches still queued (none once the scheduler has closed) give back
    /// their parent references and bodies.
    mutating func deallocate() {
        while count > 0 { popFirst().parent.release() }
        buffer.deallocate()
    }
}
