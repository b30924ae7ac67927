import Coroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The non-blocking descriptor shared by ``TCPSocket`` and ``TCPListener``, with the rules of
/// SPEC §10: one reader and one writer at a time, and a `close()` that wakes both.
///
/// The descriptor is released (`close(2)`) only once it is closed **and** no operation is inside
/// it, by whichever of `close()` or the last operation comes second (the way Go's `fdMutex`
/// counts references). So a descriptor number is never reused while a coroutine still waits on
/// it or is inside a system call with it, and it is never leaked: `deinit` releases a descriptor
/// nobody closed.
///
/// Threading: every method is thread-safe; `state` is guarded by its mutex, `fd` is immutable.
final class SocketDescriptor: Sendable {
    enum Role { case reader, writer }

    struct State {
        var isClosed = false
        /// `close(2)` was called on `fd` (or is about to be, by the caller that set this).
        var isReleased = false
        var reading = false
        var writing = false
        /// The published wait of the reader / writer, for `close()` to end.
        var readWaiter: IOWaitToken?
        var writeWaiter: IOWaitToken?
    }

    let fd: Int32
    private let state = Mutex(State())

    /// Takes ownership of `fd`, which must be non-blocking.
    init(fd: Int32) { self.fd = fd }

    deinit {
        let release = state.locked { s in
            let r = !s.isReleased
            s.isReleased = true
            return r
        }
        if release { _ = systemClose(fd) }
    }

    var isClosed: Bool { state.locked { $0.isClosed } }

    /// Runs `body` as the socket's one reader or one writer.
    /// - Throws: ``SocketError/closed`` or ``SocketError/busy`` before `body` runs; what `body` throws.
    func withOperation<R>(_ role: Role, _ body: () throws -> R) throws -> R {
        try state.locked { s throws(SocketError) in
            if s.isClosed { throw SocketError.closed }
            switch role {
            case .reader:
                if s.reading { throw SocketError.busy }
                s.reading = true
            case .writer:
                if s.writing { throw SocketError.busy }
                s.writing = true
            }
        }
        defer { endOperation(role) }
        return try body()
    }

    private func endOperation(_ role: Role) {
        let release = state.locked { s in
            switch role {
            case .reader: s.reading = false
            case .writer: s.writing = false
            }
            guard s.isClosed, !s.reading, !s.writing, !s.isReleased else { return false }
            s.isReleased = true
            return true
        }
        if release { _ = systemClose(fd) }
    }

    /// Suspends the current operation until `fd` is ready for `role`, or the socket is closed.
    ///
    /// Call only inside ``withOperation(_:_:)`` for the same role.
    /// - Throws: ``SocketError/closed`` if the socket was (or gets) closed; `CancellationError`,
    ///   `CoroutineError.timedOut`, `CoroutineError.notInCoroutine`.
    func waitUntilReady(_ role: Role) throws {
        defer {
            state.locked { s in
                if role == .reader { s.readWaiter = nil } else { s.writeWaiter = nil }
            }
        }
        try Coroutine.waitForIO(fd, writable: role == .writer) { token in
            state.locked { s in
                guard !s.isClosed else { return false }
                if role == .reader { s.readWaiter = token } else { s.writeWaiter = token }
                return true
            }
        }
        if isClosed { throw SocketError.closed }
    }

    /// Closes the socket: waiting operations throw ``SocketError/closed``, later ones too.
    /// Idempotent; any thread; never suspends.
    func close() {
        let (release, waiters) = state.locked { s -> (Bool, [IOWaitToken]) in
            guard !s.isClosed else { return (false, []) }
            s.isClosed = true
            let waiters = [s.readWaiter, s.writeWaiter].compactMap { $0 }
            s.readWaiter = nil
            s.writeWaiter = nil
            guard !s.reading, !s.writing else { return (false, waiters) }
            s.isReleased = true
            return (true, [])
        }
        if release { _ = systemClose(fd) }
        for w in waiters { w.interrupt() }
    }
}

/// `close(2)`, retried never (on Linux the descriptor is gone even when it reports `EINTR`).
@inline(__always)
func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

/// Makes `fd` non-blocking and close-on-exec, and on Darwin stops `SIGPIPE` on writes.
func configureNonBlocking(_ fd: Int32) throws {
    let flags = fcntl(fd, F_GETFL)
    guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
        throw SocketError(errno: errno, operation: "fcntl")
    }
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    #if canImport(Darwin)
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
    #endif
}

/// A new non-blocking, close-on-exec TCP socket descriptor of `family`.
func makeTCPDescriptor(family: Int32) throws -> Int32 {
    #if canImport(Glibc)
    let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SocketError(errno: errno, operation: "socket") }
    #else
    let fd = socket(family, SOCK_STREAM, 0)
    guard fd >= 0 else { throw SocketError(errno: errno, operation: "socket") }
    do { try configureNonBlocking(fd) } catch { _ = systemClose(fd); throw error }
    #endif
    return fd
}

/// Sets an `Int32` socket option, ignoring failure (options here are best-effort tuning).
func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
    var v = value
    _ = setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size))
}

/// The local address of `fd` (`getsockname`).
func localAddress(of fd: Int32) -> SocketAddress? {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    return withUnsafeMutableBytes(of: &storage) { raw -> SocketAddress? in
        guard getsockname(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) == 0 else { return nil }
        return SocketAddress(raw.baseAddress!, length: Int(length))
    }
}
