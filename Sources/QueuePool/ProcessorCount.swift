#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Returns the number of processors the calling thread may run on.
///
/// The count sizes thread and queue pools: ``DispatchQueuePool/default(for:)`` here, and the
/// `SchedulerPool` of the sibling module `Coroutines`. It honours CPU restrictions that a plain
/// "processors online" count ignores, so a process started under `taskset -c 0` or with a cgroup
/// `cpuset` does not create more threads than it may use.
///
/// - On Linux it is the number of CPUs in the calling thread's affinity mask
///   (`sched_getaffinity(0, …)`), falling back to `sysconf(_SC_NPROCESSORS_ONLN)` when the mask
///   cannot be read (for instance on machines with more than 1,024 CPUs).
/// - On Darwin it is `sysctlbyname("hw.activecpu")`.
/// - Elsewhere it is `1`.
///
/// ```swift
/// let workers = min(max(activeProcessorCount(), 1), 32)
/// ```
///
/// The function does not suspend: it is a plain system call.
///
/// - Returns: The number of usable processors; at least `1`.
/// - Complexity: O(1); one or two system calls, not cached, so call it once and keep the result.
package func activeProcessorCount() -> Int {
    #if canImport(Glibc)
    if let count = affinityProcessorCount(), count > 0 {
        return count
    }
    return max(sysconf(Int32(_SC_NPROCESSORS_ONLN)), 1)
    #elseif canImport(Darwin)
    var count: Int32 = 0
    var size = MemoryLayout<Int32>.size
    guard sysctlbyname("hw.activecpu", &count, &size, nil, 0) == 0 else {
        return 1
    }
    return max(Int(count), 1)
    #else
    return 1
    #endif
}

#if canImport(Glibc)
/// The C signature of `sched_getaffinity(2)`.
private typealias SchedGetAffinity = @convention(c) (pid_t, Int, UnsafeMutablePointer<cpu_set_t>) -> Int32

/// Counts the CPUs in the calling thread's affinity mask, or returns `nil` if it cannot be read.
///
/// `sched_getaffinity` is a GNU extension: glibc declares it only under `_GNU_SOURCE`, which the
/// `Glibc` module does not define, so Swift cannot see the declaration. The symbol itself is always
/// exported by libc, so it is looked up at run time with `dlsym` and called through its C type.
private func affinityProcessorCount() -> Int? {
    guard let libc = dlopen(nil, RTLD_NOW) else {
        return nil
    }
    defer { dlclose(libc) }
    guard let symbol = dlsym(libc, "sched_getaffinity") else {
        return nil
    }
    let schedGetAffinity = unsafeBitCast(symbol, to: SchedGetAffinity.self)
    var mask = cpu_set_t()
    // pid 0 is the calling thread.
    guard schedGetAffinity(0, MemoryLayout<cpu_set_t>.size, &mask) == 0 else {
        return nil
    }
    return withUnsafeBytes(of: &mask) { bytes in
        bytes.reduce(0) { $0 + $1.nonzeroBitCount }
    }
}
#endif
