import CCoroutines
import Synchronization

/// A small thread lock with explicit `lock()`/`unlock()`, for the channels.
///
/// `select` must hold the locks of all its channels at once, taken in address order (Go runtime
/// `select.go`, `sellock`), which `Mutex.withLock`'s closure form cannot express for a run-time
/// number of channels. The lock is the three-state futex mutex of Ulrich Drepper's "Futexes Are
/// Tricky" (mutex 2): 0 free, 1 locked, 2 locked with possible sleepers. Uncontended, lock and
/// unlock are one atomic operation each; a contended locker spins briefly, then sleeps in the
/// kernel.
///
/// It is a *thread* lock: it is never held across a coroutine suspension (critical sections only
/// move values and waiter records). Because it is built from `Synchronization.Atomic`, which
/// is compiled into this module, ThreadSanitizer sees its happens-before edges without
/// annotations.
///
/// - Thread-safety: the whole point. Not reentrant.
@usableFromInline
struct FutexLock: ~Copyable, @unchecked Sendable {
    @usableFromInline let word = Atomic<UInt32>(0)

    @inlinable init() {}

    /// Takes the lock, sleeping if another thread holds it.
    @inlinable @inline(__always)
    func lock() {
        if word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
        lockContended()
    }

    /// Releases the lock and wakes one sleeper if there may be one.
    @inlinable @inline(__always)
    func unlock() {
        if word.exchange(0, ordering: .releasing) == 2 { wakeOne() }
    }

    @usableFromInline
    func lockContended() {
        for _ in 0..<64 {
            if word.load(ordering: .relaxed) == 0,
               word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
        }
        while word.exchange(2, ordering: .acquiring) != 0 {
            withUnsafePointer(to: word) { p in
                ccoro_futex_wait(UnsafeMutableRawPointer(mutating: p).assumingMemoryBound(to: UInt32.self), 2)
            }
        }
    }

    @usableFromInline
    func wakeOne() {
        withUnsafePointer(to: word) { p in
            ccoro_futex_wake_one(UnsafeMutableRawPointer(mutating: p).assumingMemoryBound(to: UInt32.self))
        }
    }
}
