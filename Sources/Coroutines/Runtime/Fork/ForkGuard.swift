import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// What the runtime does in a process made by fork() (see <doc:BlockingAndStopping>, "Forked
// child processes").
//
// A forked child has one thread, the one that called fork(). The runtime's other threads —
// dedicated and pool schedulers, the stall monitor — do not exist in it, and every scheduler's
// epoll and eventfd descriptors are shared with the parent: a wake-up written by the child would
// wake the parent's loop, and anything queued would never run. So in a child the runtime refuses
// to work, as tokio's runtime does after fork, and says why (`CoroutineError.forkedProcess`).
//
// Invariants
//   1. The handler is installed before the runtime's first descriptor and first thread exist:
//      every scheduler creates its ``Poller`` before anything else can drive it or start a
//      thread, and `Poller.init` calls ``ForkGuard/install()`` first. Once per process.
//   2. ``ForkGuard/isForkedChild`` is false for good in the process that installed it, and true
//      for good in each child it forks (and their children): one relaxed load of a word that the
//      parent never writes.
//   3. In a child, nothing of the runtime writes to an inherited descriptor, changes an inherited
//      poller, waits for a parent's thread, or starts a thread: every launch finishes at once with
//      `forkedProcess` without being registered or queued (``Coroutine/finishInForkedChild(_:)``),
//      `runBlocking`, `Coroutine.run` and suspending calls throw it, wake-ups post nothing to the
//      poller, and a scheduler created in the child starts no thread.
//   4. The checks are on slow paths only — launch admission, wake-up of a parked loop, entry to
//      `runBlocking`, the error of a suspending call made outside a coroutine, the interrupt path
//      of a suspension (which the child handler arms for a coroutine that forked), and the loop's
//      return from a finished coroutine or a job (a thread that forked there must not go on
//      running the parent's copies: ``forkedChildReturnedToLoop(_:)``). The switch path reads
//      nothing new.
//   5. posix_spawn (Foundation's `Process`) and vfork run no fork handler: their children exec
//      and are never marked.

/// The process-wide fork guard: installs the fork handler and tells whether this process is a
/// forked child of one whose runtime was running. Thread-safe. Package-visible for
/// CoroutinesFoundation's suspending calls.
package enum ForkGuard {
    /// Installs the fork handler once per process. Any thread; O(1) after the first call.
    static func install() {
        ccoro_fork_install(childHook)
    }

    /// True in a forked child (invariant 2).
    @inline(__always)
    package static var isForkedChild: Bool { _slowPath(ccoro_is_forked_child() != 0) }

    /// Called by the fork handler in the child, on its only thread, after the process was marked.
    /// If that thread is running a coroutine (it called fork()), the coroutine is marked cancelled,
    /// so that its next suspending call takes the interrupt path, which throws
    /// `CoroutineError.forkedProcess` in a child (``Coroutine/throwInterrupt()``). Only a store:
    /// no lock, no allocation.
    private static let childHook: @convention(c) () -> Void = {
        guard let p = ccoro_tls_coroutine() else { return }
        Unmanaged<Coroutine>.fromOpaque(p)._withUnsafeGuaranteedRef {
            $0.cancelledFlag.store(true, ordering: .sequentiallyConsistent)
        }
    }

    /// Stops a forked child whose thread came back to a scheduler's loop (a coroutine or loop job
    /// that called fork() returned in the child): the loop would run copies of the parent's
    /// coroutines and poll the parent's descriptors.
    static func forkedChildReturnedToLoop(_ scheduler: String) -> Never {
        fatalError("swift-coroutines: a forked child (pid \(getpid()), forked from \(ccoro_runtime_pid())) returned to scheduler '\(scheduler)''s loop; the runtime's threads do not exist in a forked child: exec or _exit before returning")
    }
}
