import CCoroutines
import Synchronization

extension Mutex where Value: ~Copyable {
    /// `withLock`, with the lock's happens-before edges announced to ThreadSanitizer.
    ///
    /// `Synchronization.Mutex` is compiled into the toolchain without TSan instrumentation, so
    /// under `--sanitize=thread` every lock it guards would look racy. The annotations are calls
    /// to no-op functions in normal builds.
    @inlinable @inline(__always)
    package borrowing func locked<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = withUnsafePointer(to: self) { UnsafeMutableRawPointer(mutating: $0) }
        return try withLock { (value: inout sending Value) throws(E) -> sending Result in
            ccoro_tsan_acquire(address)
            defer { ccoro_tsan_release(address) }
            return try body(&value)
        }
    }
}
