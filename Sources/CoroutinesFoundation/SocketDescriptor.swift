import Coroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The non-blocking descriptor shared by ``TCPSocket`` and ``TCPListener``, with the rules of
/// <doc:Sockets>: one reader and one writer at a time, and a `close()` that wakes both.
///
/// The descriptor is released (`close(2)`) only once it is closed **and** no operation is inside
/// it, by whichever of `close()` or the last operation comes second (the way Go's `fdMutex`
/// counts references). So a descriptor number is never reused while a coroutine still waits on
/// it or is inside a system call with it, and it is never leaked: `deinit` releases a descriptor
/// nobody closed.
///
/// Readiness comes from the schedulers' persistent edge-triggered registrations
/// (``PollDescriptor``, Go's netpoll): registered once per scheduler on the first wait there,
/// dropped by the kernel when `close(2)` releases the descriptor.
///
/// ## State
/// One atomic word (Go's `fdMutex`, reduced to one reader and one writer): `closed`, `released`,
/// `reading`, `writing`. Transitions, each one compare-and-swap:
/// * begin an operation: fails with `closed` set (→ ``SocketError/closed``) or the role's bit set
///   (→ ``SocketError/busy``); else sets the role's bit.
/// * end an operation: clears the role's bit; if `closed` is set and no operation is left, sets
///   `released` and that caller calls `close(2)`.
/// * `close()`: sets `closed`; with no operation inside, also sets `released` and calls
///   `close(2)`; otherwise it interrupts the published waits.
/// Invariant: `released` is set once, by the caller that calls `close(2)`, and only while no
/// operation is inside. The published wait tokens sit behind a mutex that is taken only around a
/// suspension and by `close()`; a token is published only while `closed` is clear (checked under
/// that mutex, after `close()` set it), so a close never misses a waiter.
///
/// Threading: every method is thread-safe; `fd` is immutable.
final class SocketDescriptor: Sendable {
    /// The socket's one reader or one writer.
    enum Role {
        case reader, writer

        /// The role's bit in the state word.
        var bit: UInt8 { self == .reader ? SocketDescriptor.reading : SocketDescriptor.writing }
    }

    private static let closed: UInt8 = 1
    private static let released: UInt8 = 2
    private static let reading: UInt8 = 4
    private static let writing: UInt8 = 8

    /// The published wait of the reader / writer, for `close()` to end.
    struct Waiters {
        var reader: IOWaitToken?
        var writer: IOWaitToken?
    }

    let fd: Int32
    /// The descriptor's poller registrations (one per scheduler it was waited on).
    let poll: PollDescriptor
    private let state = Atomic<UInt8>(0)
    private let waiters = Mutex(Waiters())

    /// Takes ownership of `fd`, which must be non-blocking.
    init(fd: Int32) {
        self.fd = fd
        poll = PollDescriptor(fd: fd)
    }

    deinit {
        if state.load(ordering: .sequentiallyConsistent) & Self.released == 0 { _ = systemClose(fd) }
    }

    var isClosed: Bool { state.load(ordering: .sequentiallyConsistent) & Self.closed != 0 }

    /// Runs `body` as the socket's one reader or one writer.
    /// - Throws: ``SocketError/closed`` or ``SocketError/busy`` before `body` runs; what `body` throws.
    func withOperation<R>(_ role: Role, _ body: () throws -> R) throws -> R {
        let bit = role.bit
        var s = state.load(ordering: .relaxed)
        while true {
            if s & Self.closed != 0 { throw SocketError.closed }
            if s & bit != 0 { throw SocketError.busy }
            let (exchanged, original) = state.compareExchange(expected: s, desired: s | bit,
                                                              ordering: .sequentiallyConsistent)
            if exchanged { break }
            s = original
        }
        defer { endOperation(bit) }
        return try body()
    }

    private func endOperation(_ bit: UInt8) {
        var s = state.load(ordering: .relaxed)
        while true {
            var next = s & ~bit
            let release = next & (Self.closed | Self.released | Self.reading | Self.writing) == Self.closed
            if release { next |= Self.released }
            let (exchanged, original) = state.compareExchange(expected: s, desired: next,
                                                              ordering: .sequentiallyConsistent)
            if exchanged {
                if release { _ = systemClose(fd) }
                return
            }
            s = original
        }
    }

    /// Suspends the current operation until `fd` is ready for `role`, or the socket is closed.
    /// Returns at once if readiness arrived since the last wait (edge-triggered; the caller
    /// retries its system call and waits again on `EAGAIN`).
    ///
    /// Call only inside ``withOperation(_:_:)`` for the same role.
    /// - Throws: ``SocketError/closed`` if the socket was (or gets) closed; `CancellationError`,
    ///   `CoroutineError.timedOut`, `CoroutineError.notInCoroutine`.
    func waitUntilReady(_ role: Role) throws {
        var published = false
        defer {
            if published {
                waiters.locked { w in
                    if role == .reader { w.reader = nil } else { w.writer = nil }
                }
            }
        }
        try poll.wait(writable: role == .writer) { token in
            published = waiters.locked { w in
                guard !isClosed else { return false }
                if role == .reader { w.reader = token } else { w.writer = token }
                return true
            }
            return published
        }
        if isClosed { throw SocketError.closed }
    }

    /// Closes the socket: waiting operations throw ``SocketError/closed``, later ones too.
    /// Idempotent; any thread; never suspends.
    func close() {
        var s = state.load(ordering: .relaxed)
        var release = false
        while true {
            if s & Self.closed != 0 { return }
            release = s & (Self.reading | Self.writing) == 0
            let next = s | Self.closed | (release ? Self.released : 0)
            let (exchanged, original) = state.compareExchange(expected: s, desired: next,
                                                              ordering: .sequentiallyConsistent)
            if exchanged { break }
            s = original
        }
        if release {
            _ = systemClose(fd)
            return
        }
        let (reader, writer) = waiters.locked { w in
            let taken = (w.reader, w.writer)
            w.reader = nil
            w.writer = nil
            return taken
        }
        reader?.interrupt()
        writer?.interrupt()
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
