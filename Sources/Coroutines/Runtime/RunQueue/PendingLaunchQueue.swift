/// The FIFO of a scheduler's ``PendingLaunch``es and their bodies: two ``Ring``s. A body is
/// moved in and moved out, so queueing it costs no reference counting; it has a ring of its own
/// because a closure moved out of a record's field was copied instead.
///
/// - Invariant: both rings hold the same number of entries; the n-th body belongs to the n-th
///   launch.
///
/// Not thread-safe: confined to its scheduler's thread. The owner calls `deallocate()`.
/// - Complexity: amortised O(1) `append`, O(1) `popFirst`.
struct PendingLaunchQueue: ~Copyable {
    private var launches: Ring<PendingLaunch>
    /// Closures are wrapped: stored as a generic element they would be kept at the most general
    /// abstraction, and every move in or out would allocate a reabstraction thunk.
    private var bodies: Ring<Body>
    private struct Body { var run: () throws -> Void }

    init(capacity: Int = 16) {
        launches = Ring(capacity: capacity)
        bodies = Ring(capacity: capacity)
    }

    /// How many launches it holds.
    var count: Int { launches.count }

    mutating func append(_ launch: PendingLaunch, body: consuming @escaping () throws -> Void) {
        launches.append(launch)
        bodies.append(Body(run: body))
    }

    /// The oldest launch and its body, moved out. The queue is not empty.
    mutating func popFirst() -> (PendingLaunch, () throws -> Void) {
        guard let launch = launches.popFirst(), let body = bodies.popFirst() else {
            preconditionFailure("internal inconsistency: a launch marker without a pending launch")
        }
        return (launch, body.run)
    }

    /// Frees the memory. Launches still queued (none once the scheduler has closed) give back
    /// their parent references and bodies.
    mutating func deallocate() {
        while let launch = launches.popFirst() { launch.parent.release() }
        launches.deallocate()
        bodies.deallocate()
    }
}
