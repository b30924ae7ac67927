import Coroutines

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A listening TCP socket whose `accept()` suspends the calling coroutine, never its thread.
///
/// ```swift
/// let listener = try TCPListener.bind(host: "127.0.0.1", port: 7777)
/// while true {
///     let connection = try listener.accept()
///     Coroutine.launch(on: pool.next()) {
///         defer { connection.close() }
///         var buffer = [UInt8](repeating: 0, count: 4096)
///         while true {
///             let n = try buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
///             if n == 0 { return }
///             try buffer.withUnsafeBytes { try connection.write(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
///         }
///     }
/// }
/// ```
///
/// ## Threading
/// `Sendable`. One coroutine accepts at a time (a second gets ``SocketError/busy``);
/// ``close()`` may be called from any thread and wakes a waiting `accept()` with
/// ``SocketError/closed``.
///
/// ## Running out of descriptors
/// When `accept` fails with `EMFILE`/`ENFILE` (or `ENOBUFS`/`ENOMEM`), the pending connection
/// stays queued and the listener stays readable, so retrying at once would spin. `accept()` instead
/// backs off — `Coroutine.delay` of 5 ms, doubling up to 100 ms — and retries, as Go's `net/http`
/// server does. A `close()` during a back-off is seen when the back-off step ends (≤ 100 ms).
public final class TCPListener: Sendable {
    let descriptor: SocketDescriptor

    /// The bound address; its ``SocketAddress/port`` is the real port when bound to port 0.
    public let localAddress: SocketAddress

    private init(descriptor: SocketDescriptor, localAddress: SocketAddress) {
        self.descriptor = descriptor
        self.localAddress = localAddress
    }

    /// The port the listener is bound to (the ephemeral one chosen by the system for port 0).
    ///
    /// - Complexity: O(1).
    public var port: Int { localAddress.port }

    /// Whether ``close()`` was called.
    ///
    /// - Complexity: O(1). Thread-safe.
    public var isClosed: Bool { descriptor.isClosed }

    /// Binds a listener to `host:port` (with `SO_REUSEADDR`) and starts listening.
    ///
    /// - Parameters:
    ///   - host: The local address: `"0.0.0.0"` or `"::"` for every interface, `"127.0.0.1"` for
    ///     loopback only.
    ///   - port: The port; 0 picks a free ephemeral port (read it back from ``port``).
    ///   - backlog: The kernel's queue of connections not yet accepted.
    /// - Returns: The listening socket.
    /// - Throws: ``SocketError/addressInUse``, ``SocketError/invalidAddress(_:)``, another
    ///   ``SocketError``. No descriptor is left open when it throws.
    /// - Suspends: no. Callable anywhere.
    /// - Complexity: O(1) system calls.
    public static func bind(host: String, port: Int, backlog: Int32 = 1024) throws -> TCPListener {
        let address = try SocketAddress(host: host, port: port)
        let fd = try makeTCPDescriptor(family: address.family)
        let descriptor = SocketDescriptor(fd: fd)
        do {
            setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            guard address.withSockAddr({ systemBind(fd, $0, $1) }) == 0 else {
                throw SocketError(errno: errno, operation: "bind")
            }
            guard listen(fd, backlog) == 0 else { throw SocketError(errno: errno, operation: "listen") }
            guard let local = CoroutinesFoundation.localAddress(of: fd) else {
                throw SocketError(errno: errno, operation: "getsockname")
            }
            return TCPListener(descriptor: descriptor, localAddress: local)
        } catch {
            descriptor.close()
            throw error
        }
    }

    /// Waits for the next incoming connection and returns it.
    ///
    /// - Returns: The connected socket (non-blocking, `TCP_NODELAY`).
    /// - Throws: ``SocketError/closed`` if the listener is or gets closed; ``SocketError/busy``
    ///   if another coroutine is accepting; `CancellationError`; `CoroutineError.timedOut` inside
    ///   `withTimeout`; `CoroutineError.notInCoroutine` if no connection is pending outside a
    ///   coroutine. Out of descriptors it backs off and retries instead of throwing.
    /// - Suspends: yes, until a connection arrives (or during a back-off); resumes on the
    ///   coroutine's own scheduler.
    /// - Complexity: O(1) system calls per connection.
    public func accept() throws -> TCPSocket {
        try descriptor.withOperation(.reader) {
            var backoff = Duration.milliseconds(5)
            while true {
                var storage = sockaddr_storage()
                var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
                let fd = withUnsafeMutableBytes(of: &storage) { raw in
                    systemAccept(descriptor.fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
                }
                if fd >= 0 {
                    let connection = SocketDescriptor(fd: fd)
                    do { try configureNonBlocking(fd) } catch { connection.close(); throw error }
                    let remote = withUnsafeBytes(of: &storage) { SocketAddress($0.baseAddress!, length: Int(length)) }
                    return TCPSocket(descriptor: connection, remote: remote ?? localAddress)
                }
                let code = errno
                switch code {
                case EINTR, ECONNABORTED:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    try descriptor.waitUntilReady(.reader)
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    try Coroutine.delay(backoff)
                    backoff = min(backoff * 2, .milliseconds(100))
                    if descriptor.isClosed { throw SocketError.closed }
                default:
                    throw SocketError(errno: code, operation: "accept")
                }
            }
        }
    }

    /// Stops listening and closes the descriptor.
    ///
    /// A coroutine waiting in ``accept()`` is woken and throws ``SocketError/closed``; later
    /// calls throw it too. Connections already accepted are not affected. Idempotent.
    ///
    /// - Suspends: no. Thread-safe: any thread, inside or outside a coroutine.
    /// - Complexity: O(1).
    public func close() { descriptor.close() }
}

#if canImport(Glibc)
@inline(__always) private func systemBind(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ l: socklen_t) -> Int32 { Glibc.bind(fd, a, l) }
@inline(__always) private func systemAccept(_ fd: Int32, _ a: UnsafeMutablePointer<sockaddr>, _ l: UnsafeMutablePointer<socklen_t>) -> Int32 {
    // accept4 needs _GNU_SOURCE, which the Glibc module does not define: accept, then fcntl.
    Glibc.accept(fd, a, l)
}
#else
@inline(__always) private func systemBind(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ l: socklen_t) -> Int32 { Darwin.bind(fd, a, l) }
@inline(__always) private func systemAccept(_ fd: Int32, _ a: UnsafeMutablePointer<sockaddr>, _ l: UnsafeMutablePointer<socklen_t>) -> Int32 {
    Darwin.accept(fd, a, l)
}
#endif
