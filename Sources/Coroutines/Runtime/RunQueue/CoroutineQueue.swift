/// The FIFO run queue of ready coroutines of one scheduler: a ``Ring`` of unretained references
/// (no reference counting, no array uniqueness checks, no optional enum payloads).
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
typealias CoroutineQueue = Ring<Unmanaged<Coroutine>>

extension Unmanaged where Instance == Coroutine {
    /// Whether this run-queue entry is ``CoroutineScheduler/launchMarker`` (not a coroutine).
    @inline(__always)
    var isLaunchMarker: Bool { toOpaque() == CoroutineScheduler.launchMarker.toOpaque() }
}
