import Foundation

extension Coroutine {
    /// Runs blocking work on a blocking thread pool and suspends only the calling coroutine until
    /// it ends (see <doc:FoundationWork>).
    ///
    /// ```swift
    /// let digest = try Coroutine.offload { try hashFile(at: path) }   // the scheduler keeps running
    /// ```
    ///
    /// Inside a coroutine, `body` runs on a thread of `pool` (never a scheduler thread) while the
    /// coroutine's scheduler runs its other coroutines; the coroutine resumes on its own
    /// scheduler with the value or the error. Outside a coroutine, on a plain thread, `body`
    /// simply runs inline; on a scheduler thread outside a coroutine (a promise observer, say)
    /// this throws `CoroutineError.notInCoroutine`, because blocking there would stall every
    /// coroutine of that scheduler.
    ///
    /// ## Cancellation
    /// A running body cannot be interrupted. Cancelling the waiting coroutine (or an expiring
    /// `withTimeout`) makes `offload` throw `CancellationError` (or `CoroutineError.timedOut`) at
    /// once; the body runs on to its end on the pool and its value or error is discarded. If the
    /// body finished before the cancellation claimed the wait, `offload` returns its value normally
    /// and the cancellation is seen at the next suspending call (see <doc:FoundationWork>). A
    /// coroutine already cancelled when it calls `offload` throws at once and the body never runs.
    ///
    /// - Parameters:
    ///   - pool: Where the body runs; ``BlockingPool/shared`` by default.
    ///   - body: The blocking work. It runs outside any coroutine, so it must not call suspending
    ///     operations (they would throw `notInCoroutine`).
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw; `CancellationError`; `CoroutineError.timedOut`;
    ///   `CoroutineError.notInCoroutine` on a scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine; resumes on the coroutine's own scheduler.
    /// - Complexity: O(1) besides the body: one job handed to the pool and one wake-up.
    public static func offload<Value: Sendable>(to pool: BlockingPool = .shared,
                                                _ body: @escaping @Sendable () throws -> Value) throws -> Value {
        guard Coroutine.current != nil else {
            if CoroutineScheduler.current != nil { throw CoroutineError.notInCoroutine }
            return try body()
        }
        return try Coroutine.suspend(waitingFor: .offload) { complete in
            pool.submit { complete(Result(catching: body)) }
        }
    }
}
