/// The FIFO of a scheduler's ``PendingLaunch``es and their bodies: two power-of-two rings in
/// manually managed memory, as ``CoroutineQueue`` (no optional payloads, no array uniqueness
/// checks). A body is moved in and moved out, so queueing it costs no reference counting; it
/// has a ring of its own because a closure moved out of a record's field was copied instead.
///
/// Not thread-safe: confined to its scheduler's thread. The owner calls `deallocate()`.
/// - Complexity: amortised O(1) `append`, O(1) `popFirst`.
struct PendingLaunchQueue {
    private var launches: UnsafeMutablePointer<PendingLaunch>
    /// Closures are wrapped: stored as a generic pointee they would be kept at the most general
    /// abstraction, and every move in or out would allocate a reabstraction thunk.
    private var bodies: UnsafeMutablePointer<Body>
    private struct Body { var run: () throws -> Void }
    private var mask: Int
    private var head = 0
    private(set) var count = 0

    init(capacity: Int = 16) {
        let c = ringCapacity(atLeast: capacity)
        launches = .allocate(capacity: c)
        bodies = .allocate(capacity: c)
        mask = c - 1
    }

    mutating func append(_ launch: PendingLaunch, body: consuming @escaping () throws -> Void) {
        if count == mask + 1 { grow() }
        let i = (head + count) & mask
        (launches + i).initialize(to: launch)
        (bodies + i).initialize(to: Body(run: body))
        count += 1
    }

    /// The oldest launch and its body, moved out. The queue is not empty.
    mutating func popFirst() -> (PendingLaunch, () throws -> Void) {
        precondition(count > 0, "internal inconsistency: a launch marker without a pending launch")
        let launch = (launches + head).move()
        let body = (bodies + head).move().run
        head = (head + 1) & mask
        count -= 1
        return (launch, body)
    }

    private mutating func grow() {
        let capacity = (mask + 1) * 2
        let newLaunches = UnsafeMutablePointer<PendingLaunch>.allocate(capacity: capacity)
        let newBodies = UnsafeMutablePointer<Body>.allocate(capacity: capacity)
        for i in 0..<count {
            let j = (head + i) & mask
            (newLaunches + i).moveInitialize(from: launches + j, count: 1)
            (newBodies + i).moveInitialize(from: bodies + j, count: 1)
        }
        launches.deallocate()
        bodies.deallocate()
        launches = newLaunches
        bodies = newBodies
        mask = capacity - 1
        head = 0
    }

    /// Frees the memory. Launches still queued (none once the scheduler has closed) give back
    /// their parent references and bodies.
    mutating func deallocate() {
        while count > 0 { popFirst().0.parent.release() }
        launches.deallocate()
        bodies.deallocate()
    }
}
