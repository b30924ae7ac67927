import QueuePool

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How many schedulers a default pool (``SchedulerPool/default(for:)``) gets.
///
/// The rule (see <doc:ThreadsSchedulersAndCoroutines>): one scheduler per CPU the process may
/// use. That is the affinity mask (`taskset`, a cgroup `cpuset`), further limited by the CPU
/// quota of a cgroup v2 `cpu.max` — the smallest quota of the process's cgroup and its ancestors,
/// in CPUs, rounded up, at least 1 (a container limited to 1.5 CPUs gets 2). The environment
/// variable `COROUTINES_SCHEDULERS=N` (N in `1...1024`) overrides both; another value is ignored
/// with one line on standard error.
///
/// Foundation-free, like the rest of the module (files are read with `open`/`read`). Pure
/// functions of their inputs, with the file paths injectable, so that tests can hand them a
/// fake cgroup tree. Go 1.25's container-aware `GOMAXPROCS` follows the same rule (the
/// smallest `cpu.max` of the cgroup and its ancestors, rounded up).
enum PoolSize {
    /// The largest pool: `SchedulerPool(name:count:qos:)` accepts `1...maximum`.
    static let maximum = 1_024

    /// The environment variable that sizes every default pool.
    static let variable = "COROUTINES_SCHEDULERS"

    /// The size of a default pool.
    ///
    /// - Parameters:
    ///   - environment: The process environment (`COROUTINES_SCHEDULERS`).
    ///   - affinity: CPUs in the affinity mask.
    ///   - cgroupFile: The process's cgroup membership (`/proc/self/cgroup`).
    ///   - cgroupMounts: Where cgroup v2 may be mounted, tried in order.
    ///   - warn: Receives the one line written for an invalid `COROUTINES_SCHEDULERS`.
    /// - Returns: A count in `1...maximum`.
    /// - Complexity: reads at most one file per cgroup level.
    static func defaultCount(environment: [String: String] = [variable: ProcessInfoLite.environment(variable)].compactMapValues { $0 },
                             affinity: Int = activeProcessorCount(),
                             cgroupFile: String = "/proc/self/cgroup",
                             cgroupMounts: [String] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"],
                             warn: (String) -> Void = PoolSize.writeToStandardError) -> Int {
        if let text = environment[variable] {
            let trimmed = text.split(separator: " ", omittingEmptySubsequences: true)
            if trimmed.count == 1, let n = Int(trimmed[0]), (1...maximum).contains(n) { return n }
            warn("swift-coroutines: \(variable)=\(text) is not a whole number in 1…\(maximum); ignored\n")
        }
        var count = max(affinity, 1)
        if let quota = cgroupQuota(cgroupFile: cgroupFile, mounts: cgroupMounts) { count = min(count, quota) }
        return min(count, maximum)
    }

    /// The smallest `cpu.max` quota, in whole CPUs rounded up, of the process's cgroup v2 and its
    /// ancestors; nil when no level sets one (or cgroup v2 is absent).
    static func cgroupQuota(cgroupFile: String, mounts: [String]) -> Int? {
        guard let membership = readSmallFile(cgroupFile),
              let line = membership.split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else { return nil }
        let path = String(line.dropFirst(3))
        // The v2 hierarchy: the first mount that has a cgroup.controllers file.
        guard let mount = mounts.first(where: { access($0 + "/cgroup.controllers", F_OK) == 0 }) else {
            return nil
        }
        var smallest: Int?
        var components = path.split(separator: "/").map(String.init)
        while true {
            let directory = ([mount] + components).joined(separator: "/")
            if let text = readSmallFile(directory + "/cpu.max"),
               let cpus = cpus(fromCPUMax: text) {
                smallest = min(smallest ?? cpus, cpus)
            }
            if components.isEmpty { break }
            components.removeLast()
        }
        return smallest
    }

    /// `cpu.max` reads "QUOTA PERIOD" in microseconds, or "max PERIOD" for no limit.
    static func cpus(fromCPUMax text: String) -> Int? {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let quota = Int(fields[0]), let period = Int(fields[1]), quota > 0, period > 0 else {
            return nil
        }
        return max(1, (quota + period - 1) / period)
    }

    /// The first 4 KiB of a file as UTF-8 text, or nil if it cannot be opened.
    static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4_096)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { return nil }
        return String(decoding: bytes[0..<n], as: UTF8.self)
    }

    static func writeToStandardError(_ line: String) {
        line.withCString { _ = write(2, $0, strlen($0)) }
    }
}
