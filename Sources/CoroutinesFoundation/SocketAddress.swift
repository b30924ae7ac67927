#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address and a TCP port, as the system's `sockaddr` stores it.
///
/// ```swift
/// let address = try SocketAddress(host: "127.0.0.1", port: 7777)
/// print(address)          // 127.0.0.1:7777
/// ```
///
/// Threading: a value type; `Sendable`.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The raw `sockaddr_in` or `sockaddr_in6` bytes.
    let storage: [UInt8]

    /// Parses a numeric address (`"127.0.0.1"`, `"::1"`) or resolves a host name.
    ///
    /// Numeric addresses are parsed without any I/O. A name (`"localhost"`) is resolved with
    /// `getaddrinfo`, which may read `/etc/hosts` or ask DNS and so **blocks the calling thread**;
    /// resolve remote names once, up front, or off the scheduler.
    ///
    /// - Parameters:
    ///   - host: An IPv4 or IPv6 literal, or a host name (the first address found is used).
    ///   - port: A TCP port, 0…65535 (0: any free port when binding).
    /// - Throws: ``SocketError/invalidAddress(_:)`` for a bad port or an unresolvable host.
    /// - Suspends: no.
    /// - Complexity: O(1) for literals.
    public init(host: String, port: Int) throws {
        guard (0...65535).contains(port) else { throw SocketError.invalidAddress("port \(port) is outside 0…65535") }
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
            #if canImport(Darwin)
            v4.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
            #endif
            storage = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
            #if canImport(Darwin)
            v6.sin6_len = UInt8(MemoryLayout<sockaddr_in6>.size)
            #endif
            storage = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        guard let resolved = SocketAddress.resolve(host, port: port) else {
            throw SocketError.invalidAddress("cannot resolve host \"\(host)\"")
        }
        self = resolved
    }

    /// Copies a `sockaddr` filled in by the system (`accept`, `getsockname`).
    init?(_ address: UnsafeRawPointer, length: Int) {
        let family = Int32(address.assumingMemoryBound(to: sockaddr.self).pointee.sa_family)
        guard family == AF_INET || family == AF_INET6, length > 0 else { return nil }
        storage = Array(UnsafeRawBufferPointer(start: address, count: length))
    }

    private static func resolve(_ host: String, port: Int) -> SocketAddress? {
        // `ai_family` stays 0, the unspecified family: IPv4 or IPv6, whichever the name resolves to.
        var hints = addrinfo()
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        guard let addr = first.pointee.ai_addr else { return nil }
        return SocketAddress(addr, length: Int(first.pointee.ai_addrlen))
    }

    /// The address family: `AF_INET` or `AF_INET6`.
    var family: Int32 {
        storage.withUnsafeBytes { Int32($0.load(fromByteOffset: 0, as: sockaddr.self).sa_family) }
    }

    /// Whether this is an IPv6 address.
    ///
    /// - Complexity: O(1).
    public var isIPv6: Bool { family == AF_INET6 }

    /// The TCP port.
    ///
    /// - Complexity: O(1).
    public var port: Int {
        storage.withUnsafeBytes { raw in
            if family == AF_INET6 { return Int(UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)) }
            return Int(UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port))
        }
    }

    /// The numeric host, such as `"127.0.0.1"` or `"::1"`.
    ///
    /// - Complexity: O(1).
    public var host: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        storage.withUnsafeBytes { raw in
            if family == AF_INET6 {
                var a = raw.load(as: sockaddr_in6.self).sin6_addr
                _ = inet_ntop(AF_INET6, &a, &text, socklen_t(text.count))
            } else {
                var a = raw.load(as: sockaddr_in.self).sin_addr
                _ = inet_ntop(AF_INET, &a, &text, socklen_t(text.count))
            }
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `host:port`, with the host in brackets for IPv6 (`[::1]:7777`).
    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Calls `body` with the address as a `sockaddr` pointer and its length.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }
}
