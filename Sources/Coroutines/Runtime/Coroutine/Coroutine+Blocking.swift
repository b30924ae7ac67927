import Dispatch
import CCoroutines
import Synchronization

/// A box that carries a non-Sendable value between a coroutine and the thread that drives it.
/// Sound only because both run on the same thread (runBlocking) or hand over through a
/// synchronising call (thread start/continuation resume).
final class UncheckedBox<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// The outcome of a `runBlocking` body; confined to the driving thread.
final class BlockingResult<Value>: UnstartedObserver, @unchecked Sendable {
    var value: Result<Value, any Error>?
    func coroutineNeverRan(_ error: any Error) { value = .failure(error) }
}

extension Coroutine {
    /// Runs `body` as a coroutine on the calling thread and blocks the thread until it and every
    /// coroutine launched onto that thread's temporary scheduler have finished (Kotlin's
    /// `runBlocking`).
    ///
    /// On the main thread it drives ``CoroutineScheduler/main``. If the body throws, the
    /// coroutines still on that scheduler are cancelled and awaited, then the error is rethrown.
    ///
    /// ```swift
    /// let answer = try Coroutine.runBlocking {
    ///     try Coroutine.async { 42 }.await()
    /// }
    /// ```
    ///
    /// - Parameter body: The code to run as a coroutine.
    /// - Returns: The body's value.
    /// - Throws: `CoroutineError.nestedRunBlocking` inside a coroutine or on a thread that already
    ///   drives a scheduler; `CoroutineError.blockingCooperativeThread` on a Swift concurrency
    ///   thread (use ``run(_:)`` there); `CoroutineError.forkedProcess` in a child made by
    ///   `fork()` (the body is not run); otherwise what the body throws.
    /// - Suspends: no — it blocks the calling plain thread.
    @available(*, noasync, message: "runBlocking blocks the thread; use `try await Coroutine.run { … }`")
    public static func runBlocking<Value>(_ body: () throws -> Value) throws -> Value {
        if ForkGuard.isForkedChild { throw CoroutineError.forkedProcess }
        if Coroutine.current != nil || ccoro_tls_scheduler() != nil { throw CoroutineError.nestedRunBlocking }
        if withUnsafeCurrentTask(body: { $0 != nil }) { throw CoroutineError.blockingCooperativeThread }
        let scheduler = isMainThread()
            ? CoroutineScheduler.main
            : CoroutineScheduler(name: "runBlocking", qos: .default, kind: .temporary)
        return try drive(scheduler, body)
    }

    /// Runs `body` on a fresh temporary scheduler thread with ``runBlocking(_:)``'s semantics and
    /// awaits it without blocking: the form for async code and tests.
    ///
    /// Cancelling the awaiting task cancels the body and every coroutine on that scheduler.
    ///
    /// - Parameter body: The code to run as a coroutine.
    /// - Returns: The body's value.
    /// - Throws: What the body throws (`CancellationError` if cancelled);
    ///   `CoroutineError.forkedProcess` in a child made by `fork()` (the body is not run).
    /// - Suspends: the calling task (not a coroutine) until the scheduler has drained.
    public static func run<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
        if ForkGuard.isForkedChild { throw CoroutineError.forkedProcess }
        let scheduler = CoroutineScheduler(name: "Coroutine.run", qos: .default, kind: .temporary)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                spawnThread(name: "Coroutine.run") {
                    continuation.resume(with: Result { try drive(scheduler, name: "Coroutine.run", body) })
                }
            }
        } onCancel: {
            scheduler.cancelAllFromAnyThread()
        }
    }

    /// Drives `scheduler` on the calling thread until `body` and everything launched onto the
    /// scheduler finished.
    private static func drive<Value>(_ scheduler: CoroutineScheduler, name: String = "runBlocking",
                                     _ body: () throws -> Value) throws -> Value {
        let result = BlockingResult<Value>()
        withoutActuallyEscaping(body) { body in
            let unchecked = UncheckedBox(body)
            let c = Coroutine(scheduler: scheduler, name: name, stackSize: nil,
                              reportsUnobservedErrors: false, unstartedObserver: result,
                              body: {
                                  do {
                                      result.value = .success(try unchecked.value())
                                  } catch {
                                      result.value = .failure(error)
                                      // Cancel the rest at once, on this thread (the BlockingAndStopping
                                      // article, <doc:BlockingAndStopping>): waiting for the run queue to
                                      // empty could wait forever.
                                      scheduler.cancelAll()
                                      throw error
                                  }
                              })
            c.start(parent: nil)
            scheduler.drive { scheduler.liveCount == 0 }
            if scheduler.kind == .temporary { scheduler.close() }
            if scheduler.kind == .main { scheduler.endMainRun() }
        }
        guard let r = result.value else {
            preconditionFailure("internal inconsistency: runBlocking's coroutine ended without a result")
        }
        return try r.get()
    }
}

extension CoroutineScheduler {
    /// Cancels all coroutines from any thread (by a job on the loop if needed).
    func cancelAllFromAnyThread() {
        if isOnOwnThread { cancelAll() } else { execute { [self] in cancelAll() } }
    }
}
