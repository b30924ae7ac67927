import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A test-and-test-and-set spin lock whose unlock is a plain release store, for the runtime's
/// shortest critical sections: a coroutine's join/finish state and its parent's child list, and
/// a scheduler's registry of live coroutines.
///
/// Every coroutine takes these locks a few times in its life (launch, finish, reap), almost
/// always uncontended and on its own scheduler's thread. A futex mutex (``FutexLock``,
/// `Synchronization.Mutex`) pays an atomic read-modify-write to unlock, because the unlocker must
/// learn whether to wake a sleeper; this lock has no sleepers, so unlocking is an ordinary store
/// (on x86-64 and arm64 a plain `mov`/`stlr`) and a lock round costs one atomic operation instead
/// of two. Each locked instruction also drains the store buffer, so the saving is larger than
/// the instruction count suggests when many coroutines are created and finished.
///
/// The price is that a waiter spins instead of sleeping, so the critical sections must stay
/// short and bounded: they move a few fields and links, or copy a list out (`cancel` collecting
/// children, `dumpAll` the live coroutines); they never call user code and never suspend. A
/// waiter spins on a plain load (the "test" before the test-and-set, so it does not bounce the
/// cache line), with a pause hint between attempts, and yields the CPU after 64 attempts, so a
/// holder preempted on the same core gets to run.
///
/// Algorithm: TTAS lock (Herlihy and Shavit, *The Art of Multiprocessor Programming*, §7.3).
/// Built from `Synchronization.Atomic`, so ThreadSanitizer sees its acquire/release edges.
///
/// - Thread-safety: the whole point. Not reentrant.
@usableFromInline
struct SpinLock: ~Copyable, @unchecked Sendable {
    /// 0 free, 1 held.
    @usableFromInline let word = Atomic<UInt32>(0)

    @inlinable init() {}

    /// Takes the lock, spinning (then yielding) while another thread holds it.
    @inlinable @inline(__always)
    func lock() {
        if word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
        lockContended()
    }

    /// Releases the lock: one release store.
    @inlinable @inline(__always)
    func unlock() {
        word.store(0, ordering: .releasing)
    }

    /// Called between two holds by a thread that takes the lock again and again (a walk in
    /// chunks): waits up to about a microsecond with the lock free, or until another thread has
    /// taken it. Without this pause the walker, whose cache holds the lock's line, takes it back
    /// within nanoseconds of releasing it, and a waiter — which spins on loads, then yields the
    /// CPU — starves for the whole walk (a launch waited 50 ms behind a walk of a million
    /// coroutines).
    func pauseForWaiters() {
        for _ in 0..<128 {
            if word.load(ordering: .relaxed) != 0 { return }
            ccoro_cpu_relax()
        }
    }

    @usableFromInline
    func lockContended() {
        var attempts = 0
        while true {
            if word.load(ordering: .relaxed) == 0,
               word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
            attempts += 1
            if attempts >= 64 { sched_yield() } else { ccoro_cpu_relax() }
        }
    }
}
