import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Coroutine {
    /// The handler in a struct: a closure stored directly in the generic `Mutex` is kept at the
    /// generic abstraction, and every `locked { $0 }` read wrote it back wrapped in two more
    /// reabstraction thunks, so each unobserved error made the next call deeper. A stored
    /// property of function type keeps the closure as it is.
    private struct HandlerSlot: Sendable {
        var handler: @Sendable (Coroutine, any Error) -> Void
    }

    private static let unobservedHandlerStorage = Mutex(HandlerSlot(handler: Coroutine.defaultUnobservedErrorHandler))

    /// Called once for an error thrown by a `launch` body (other than `CancellationError`) that no
    /// coroutine was joining when it finished.
    ///
    /// The default writes one line to standard error naming the coroutine. The handler runs on
    /// the coroutine's scheduler thread, outside any coroutine; it must not block.
    /// - Threading: reading and replacing the handler are thread-safe.
    public static var unobservedErrorHandler: @Sendable (Coroutine, any Error) -> Void {
        get { unobservedHandlerStorage.locked { $0 }.handler }
        set { unobservedHandlerStorage.locked { $0.handler = newValue } }
    }

    static let defaultUnobservedErrorHandler: @Sendable (Coroutine, any Error) -> Void = { coroutine, error in
        let line = "swift-coroutines: unobserved error in \(coroutine.name.map { "'\($0)'" } ?? "an unnamed coroutine") on \(coroutine.scheduler.name): \(error)\n"
        line.withCString { _ = write(2, $0, strlen($0)) }
    }

    /// A report of every live coroutine: name, scheduler, state and what it waits on, one per line.
    ///
    /// `Coroutine.async` launches queued from a coroutine and not started yet are listed as
    /// `unnamed on <scheduler>: ready (not started)`, pool launches not started yet as
    /// `pool launch on <scheduler>: ready (not started)` under the scheduler whose queue holds
    /// them (not those in the pool's shared queue). A coroutine that is running says for how
    /// long (`running for 250 ms`), as the stall monitor's samples tell, up to 20 ms short; a
    /// run too recent for a sample, or with the monitor off, says `running` (see <doc:Stalls>).
    ///
    /// For debugging hangs. The states of coroutines on other threads may change while the
    /// report is built. In a child made by `fork()` it is one line saying that the runtime does
    /// not run there.
    /// - Suspends: no. Thread-safe.
    /// - Complexity: O(live coroutines).
    public static func dumpAll() -> String {
        // The schedulers' registries are copies of the parent's, whose locks another thread of
        // the parent may have held at the fork (ForkGuard).
        if ForkGuard.isForkedChild {
            return "swift-coroutines: forked child process: the runtime's threads and coroutines do not exist here\n"
        }
        var lines: [String] = []
        for scheduler in SchedulerDirectory.shared.all {
            for c in scheduler.liveCoroutines().reversed() {
                let status = c.status
                var line = "\(c.name.map { "'\($0)'" } ?? "unnamed") on \(scheduler.name): \(status)"
                if status == .running, let ns = scheduler.runningTime(of: c) { line += " for \(ns / 1_000_000) ms" }
                let kind = WaitKind(rawValue: c.waitKindValue.load(ordering: .relaxed)) ?? .none
                if status == .suspended || kind != .none { line += " waiting in \(kind.label)" }
                if c.isCancelled { line += " (cancelled)" }
                lines.append(line)
            }
            // `Coroutine.async` launches from a coroutine get their coroutine object only when
            // they first run (`PendingLaunch`); until then only their number is known here. They
            // are unnamed (a named launch creates its coroutine at once).
            let pending = scheduler.pendingLaunchCount.load(ordering: .relaxed)
            for _ in 0..<max(0, pending) { lines.append("unnamed on \(scheduler.name): ready (not started)") }
            // Unstarted pool launches queued here (its ring and stack): counted only, a peer may
            // start and free one while this reads. Not the pool's shared queue: a scheduler does
            // not keep its pool alive, and the directory still lists the schedulers of a stopped
            // pool that was freed until their threads have closed them.
            let queued = scheduler.launchQueue?.count ?? 0
            for _ in 0..<queued { lines.append("pool launch on \(scheduler.name): ready (not started)") }
        }
        return lines.isEmpty ? "no live coroutines" : lines.joined(separator: "\n")
    }
}

extension WaitKind {
    var label: String {
        switch self {
        case .none: "nothing"
        case .delay: "delay"
        case .yield: "yield"
        case .promise: "promise.await"
        case .join: "join"
        case .readable: "waitUntilReadable"
        case .writable: "waitUntilWritable"
        case .task: "Coroutine.await (Swift task)"
        case .channel: "channel"
        case .select: "select"
        case .mutex: "CoroutineMutex.lock"
        case .semaphore: "CoroutineSemaphore.acquire"
        case .waitGroup: "WaitGroup.wait"
        case .other: "a suspending operation"
        case .offload: "Coroutine.offload"
        case .callback: "a callback-based operation"
        case .actorRequest: "an actor request"
        }
    }
}
