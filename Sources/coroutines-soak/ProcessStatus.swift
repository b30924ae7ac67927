#if canImport(Glibc)
import Glibc
#endif

/// What the process holds, from /proc (Linux).
enum ProcessStatus {
    /// Resident memory in bytes (`VmRSS` of /proc/self/status), or -1 if unreadable.
    static func residentBytes() -> Int {
        guard let f = fopen("/proc/self/status", "r") else { return -1 }
        defer { fclose(f) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = line.withUnsafeBytes { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if text.hasPrefix("VmRSS:") {
                let kib = text.dropFirst(6).split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? -1
                return kib < 0 ? -1 : kib * 1024
            }
        }
        return -1
    }

    /// Open descriptors: the entries of /proc/self/fd, not counting the one that lists them.
    static func openDescriptors() -> Int {
        guard let dir = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0[0] == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return count - 1
    }
}
