import Coroutines
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A connected TCP socket whose reads and writes suspend the calling coroutine, never its thread.
///
/// A socket comes from ``connect(host:port:)`` or ``TCPListener/accept()``. Its descriptor is
/// non-blocking; when the kernel has no data (or no room), the operation waits with the
/// scheduler's epoll/kqueue poller, so one scheduler thread serves thousands of connections — a
/// coroutine per connection, as Go serves them. As in Go's netpoll, the socket is registered once
/// per scheduler it is used on (edge-triggered, on the first wait there) and stays registered
/// until it is closed: a wait makes no `epoll_ctl`/`kevent` call, and readiness that arrives while
/// nobody waits is remembered for the next wait.
///
/// ```swift
/// let socket = try TCPSocket.connect(host: "127.0.0.1", port: 7777)
/// defer { socket.close() }
/// try socket.write("hello\n")
/// let reply = try Coroutine.withTimeout(.seconds(5)) { try socket.read(upTo: 1024) }
/// ```
///
/// ## Threading
/// `TCPSocket` is `Sendable`: any coroutine, on any scheduler, may use it. At most **one reader
/// and one writer** at a time (a second concurrent reader or writer gets ``SocketError/busy``);
/// reading and writing from two coroutines at once is fine. ``close()`` may be called from any
/// thread, also while operations wait: they throw ``SocketError/closed``.
///
/// ## Errors and timeouts
/// Writes never raise `SIGPIPE` (`MSG_NOSIGNAL` on Linux, `SO_NOSIGPIPE` on Darwin): a peer that
/// went away is ``SocketError/connectionReset``. `EINTR` and `EAGAIN` are handled inside.
/// There are no timeout parameters: wrap any operation in `Coroutine.withTimeout(_:_:)`, which
/// throws `CoroutineError.timedOut`; the socket stays usable after a timeout or a cancellation
/// (except that a write may have sent part of its bytes).
///
/// ## Lifetime
/// ``close()`` is idempotent. A socket released without `close()` closes its descriptor in
/// `deinit`; descriptors are never leaked, also when an operation throws or is cancelled.
/// New sockets set `TCP_NODELAY` (as Go does), suiting request/response traffic.
public final class TCPSocket: Sendable {
    let descriptor: SocketDescriptor
    /// Whether the next read waits for readiness before its first `recv` (see ``read(into:)``).
    /// Touched only by the socket's one reader.
    private let readWaitsFirst = Atomic<Bool>(false)

    /// The address of the peer.
    public let remoteAddress: SocketAddress

    /// The local address of the connection.
    public let localAddress: SocketAddress

    init(descriptor: SocketDescriptor, remote: SocketAddress) {
        self.descriptor = descriptor
        remoteAddress = remote
        localAddress = CoroutinesFoundation.localAddress(of: descriptor.fd) ?? remote
        setOption(descriptor.fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    /// The operating-system descriptor, for options this type does not cover. Do not read, write
    /// or close it directly, and do not wait on it with `Coroutine.waitUntilReadable` /
    /// `waitUntilWritable` (their one-shot interest would replace the socket's own registration
    /// in the scheduler's poller).
    public var fileDescriptor: Int32 { descriptor.fd }

    /// Whether ``close()`` was called.
    ///
    /// - Complexity: O(1). Thread-safe.
    public var isClosed: Bool { descriptor.isClosed }

    /// Connects to `host:port`.
    ///
    /// - Parameters:
    ///   - host: An IPv4 or IPv6 literal, or a name (resolved with `getaddrinfo`, which blocks the
    ///     thread; see ``SocketAddress/init(host:port:)``).
    ///   - port: The TCP port.
    /// - Returns: The connected socket.
    /// - Throws: ``SocketError/connectionRefused``, ``SocketError/invalidAddress(_:)``, another
    ///   ``SocketError``; `CancellationError`; `CoroutineError.timedOut` inside `withTimeout`;
    ///   `CoroutineError.notInCoroutine` if the connection cannot complete at once outside a
    ///   coroutine. No descriptor is left open when it throws.
    /// - Suspends: yes, while the connection is being established; resumes on the coroutine's own
    ///   scheduler.
    /// - Complexity: O(1) system calls.
    public static func connect(host: String, port: Int) throws -> TCPSocket {
        try connect(to: SocketAddress(host: host, port: port))
    }

    /// Connects to `address`.
    ///
    /// - Parameter address: The peer.
    /// - Returns: The connected socket.
    /// - Throws: as ``connect(host:port:)``.
    /// - Suspends: yes, while the connection is being established; resumes on the coroutine's own
    ///   scheduler.
    /// - Complexity: O(1) system calls.
    public static func connect(to address: SocketAddress) throws -> TCPSocket {
        let descriptor = SocketDescriptor(fd: try makeTCPDescriptor(family: address.family))
        do {
            try descriptor.withOperation(.writer) {
                let rc = address.withSockAddr { systemConnect(descriptor.fd, $0, $1) }
                guard rc != 0 else { return }
                guard errno == EINPROGRESS || errno == EINTR else {
                    throw SocketError(errno: errno, operation: "connect")
                }
                try descriptor.waitUntilReady(.writer)
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                guard getsockopt(descriptor.fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else {
                    throw SocketError(errno: errno, operation: "getsockopt")
                }
                if error != 0 { throw SocketError(errno: error, operation: "connect") }
            }
        } catch {
            descriptor.close()
            throw error
        }
        return TCPSocket(descriptor: descriptor, remote: address)
    }

    /// Reads what is available, up to `buffer.count` bytes, waiting until at least one byte is.
    ///
    /// - Parameter buffer: Where to store the bytes; must not be empty.
    /// - Returns: The number of bytes read, 1…`buffer.count`; 0 once the peer closed its side
    ///   (end of stream).
    /// - Throws: ``SocketError/busy`` if another coroutine is reading; ``SocketError/closed``
    ///   if the socket is or gets closed; ``SocketError/connectionReset``; `CancellationError`;
    ///   `CoroutineError.timedOut` inside `withTimeout`; `CoroutineError.notInCoroutine` if no data
    ///   is ready outside a coroutine.
    /// - Suspends: yes, while no data is available; resumes on the coroutine's own scheduler.
    /// - Complexity: O(n) in the bytes copied, one `recv` per wake-up.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        precondition(buffer.count > 0, "TCPSocket.read(into:) needs a non-empty buffer")
        return try descriptor.withOperation(.reader) {
            // Request/response traffic: when the last read had to wait and got a short chunk, the
            // next one most likely finds nothing either, so it waits for readiness first instead
            // of paying a `recv` that fails with EAGAIN. (If data arrived meanwhile, its edge was
            // remembered and the wait returns at once, without a system call.) Bulk transfers fill
            // the buffer and keep reading first.
            var waitFirst = readWaitsFirst.load(ordering: .relaxed)
            var waited = false
            while true {
                if waitFirst {
                    waitFirst = false
                    waited = true
                    try descriptor.waitUntilReady(.reader)
                }
                let n = recv(descriptor.fd, buffer.baseAddress, buffer.count, 0)
                if n >= 0 {
                    readWaitsFirst.store(waited && n > 0 && n < buffer.count, ordering: .relaxed)
                    return n
                }
                let code = errno
                switch code {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: waitFirst = true
                default: throw SocketError(errno: code, operation: "read")
                }
            }
        }
    }

    /// Reads what is available, up to `maxCount` bytes, waiting until at least one byte is.
    ///
    /// - Parameter maxCount: The most bytes to return; at least 1.
    /// - Returns: 1…`maxCount` bytes; empty once the peer closed its side (end of stream).
    /// - Throws: as ``read(into:)``.
    /// - Suspends: yes, while no data is available; resumes on the coroutine's own scheduler.
    /// - Complexity: O(`maxCount`) for the allocation, plus the copy.
    public func read(upTo maxCount: Int) throws -> [UInt8] {
        precondition(maxCount > 0, "TCPSocket.read(upTo:) needs maxCount > 0")
        var bytes = [UInt8](repeating: 0, count: maxCount)
        let n = try bytes.withUnsafeMutableBytes { try read(into: $0) }
        bytes.removeLast(maxCount - n)
        return bytes
    }

    /// Writes all of `buffer`, waiting for room in the kernel's send buffer as needed.
    ///
    /// - Parameter buffer: The bytes to send (may be empty: returns at once).
    /// - Throws: ``SocketError/busy`` if another coroutine is writing; ``SocketError/closed``;
    ///   ``SocketError/connectionReset`` if the peer went away (never `SIGPIPE`);
    ///   `CancellationError`; `CoroutineError.timedOut` inside `withTimeout`. After a throw, an
    ///   unknown prefix of `buffer` may have been sent.
    /// - Suspends: yes, while the send buffer is full; resumes on the coroutine's own scheduler.
    /// - Complexity: O(n) in the bytes written.
    public func write(_ buffer: UnsafeRawBufferPointer) throws {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        try descriptor.withOperation(.writer) {
            var offset = 0
            while offset < buffer.count {
                let n = send(descriptor.fd, base + offset, buffer.count - offset, sendFlags)
                if n >= 0 { offset += n; continue }
                let code = errno
                switch code {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: try descriptor.waitUntilReady(.writer)
                default: throw SocketError(errno: code, operation: "write")
                }
            }
        }
    }

    /// Writes all of `bytes`. See ``write(_:)-(UnsafeRawBufferPointer)``.
    ///
    /// - Parameter bytes: The bytes to send.
    /// - Throws: as ``write(_:)-(UnsafeRawBufferPointer)``.
    /// - Suspends: yes, while the send buffer is full; resumes on the coroutine's own scheduler.
    /// - Complexity: O(n).
    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// Writes all of `data`. See ``write(_:)-(UnsafeRawBufferPointer)``.
    ///
    /// - Parameter data: The bytes to send.
    /// - Throws: as ``write(_:)-(UnsafeRawBufferPointer)``.
    /// - Suspends: yes, while the send buffer is full; resumes on the coroutine's own scheduler.
    /// - Complexity: O(n).
    public func write(_ data: Data) throws {
        try data.withUnsafeBytes { try write($0) }
    }

    /// Writes the UTF-8 bytes of `string`. See ``write(_:)-(UnsafeRawBufferPointer)``.
    ///
    /// - Parameter string: The text to send.
    /// - Throws: as ``write(_:)-(UnsafeRawBufferPointer)``.
    /// - Suspends: yes, while the send buffer is full; resumes on the coroutine's own scheduler.
    /// - Complexity: O(n).
    public func write(_ string: String) throws {
        var s = string
        try s.withUTF8 { try write(UnsafeRawBufferPointer($0)) }
    }

    /// Closes the socket.
    ///
    /// A reader and a writer waiting on it are woken and throw ``SocketError/closed``; every
    /// later operation throws it too. The descriptor itself is closed as soon as no operation is
    /// inside it. Idempotent.
    ///
    /// - Suspends: no. Thread-safe: any thread, inside or outside a coroutine.
    /// - Complexity: O(1).
    public func close() { descriptor.close() }
}

#if canImport(Glibc)
private let sendFlags = Int32(MSG_NOSIGNAL)
@inline(__always) func systemConnect(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ l: socklen_t) -> Int32 { Glibc.connect(fd, a, l) }
#else
private let sendFlags: Int32 = 0
@inline(__always) func systemConnect(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ l: socklen_t) -> Int32 { Darwin.connect(fd, a, l) }
#endif
