import Coroutines
import CoroutinesFoundation
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The peer closed before `count` bytes arrived.
struct UnexpectedEndOfStream: Error {}

/// Reads exactly `count` bytes (the echo of one message may arrive in pieces).
func readExactly(_ socket: TCPSocket, _ count: Int) throws -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count {
        let chunk = try socket.read(upTo: count - bytes.count)
        if chunk.isEmpty { throw UnexpectedEndOfStream() }
        bytes += chunk
    }
    return bytes
}

/// The inode of a socket descriptor (the number in `/proc/self/fd/N -> socket:[inode]`).
func inode(of fd: Int32) -> UInt64 {
    var st = stat()
    guard fstat(fd, &st) == 0 else { return 0 }
    return UInt64(st.st_ino)
}

/// The socket inodes the process has open now, from `/proc/self/fd` (empty where absent).
func openSocketInodes() -> Set<UInt64> {
    let dir = "/proc/self/fd"
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return [] }
    var result = Set<UInt64>()
    for entry in entries {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + entry),
              target.hasPrefix("socket:["), target.hasSuffix("]"),
              let number = UInt64(target.dropFirst(8).dropLast()) else { continue }
        result.insert(number)
    }
    return result
}

/// The number of descriptors the process has open (`/proc/self/fd` entries).
func openDescriptorCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
}

/// Raises the soft descriptor limit to the hard limit; returns the new soft limit.
@discardableResult
func raiseDescriptorLimit() -> UInt64 {
    var limit = rlimit()
    #if canImport(Glibc)
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    let resource = RLIMIT_NOFILE
    #endif
    guard getrlimit(resource, &limit) == 0 else { return 0 }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(resource, &limit)
    _ = getrlimit(resource, &limit)
    return UInt64(limit.rlim_cur)
}

/// Makes `close` send a reset instead of a FIN (`SO_LINGER` with a zero timeout).
func setResetOnClose(_ socket: TCPSocket) {
    var option = linger(l_onoff: 1, l_linger: 0)
    _ = setsockopt(socket.fileDescriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
}

/// Socket inodes recorded from several coroutines.
final class InodeLog: Sendable {
    private let values = Mutex<[UInt64]>([])
    func record(_ socket: TCPSocket) { let i = inode(of: socket.fileDescriptor); values.locked { $0.append(i) } }
    var all: [UInt64] { values.locked { $0 } }
}
