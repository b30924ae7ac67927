/// A job queued to run on a scheduler's loop, outside any coroutine (``CoroutineScheduler``'s
/// `jobs`, a ``Ring``). The closure is wrapped: stored as a generic element it would be kept at
/// the most general abstraction, and every move in or out would allocate a reabstraction thunk.
struct LoopJob {
    let run: () -> Void
}
