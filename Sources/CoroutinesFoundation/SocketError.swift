#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a socket operation of ``TCPSocket`` or ``TCPListener`` failed.
///
/// Timeouts are not socket errors: wrap an operation in `Coroutine.withTimeout(_:_:)`, which throws
/// `CoroutineError.timedOut`. Cancellation throws the standard `CancellationError`.
///
/// ```swift
/// do {
///     let n = try socket.read(into: buffer)
/// } catch SocketError.connectionReset {
///     // the peer went away
/// }
/// ```
public enum SocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Another coroutine is already reading (or writing, or accepting) on this socket. A socket
    /// allows one reader and one writer at a time; give each direction a single owner.
    case busy
    /// The socket was closed, before or during the operation. `close()` wakes the operations
    /// waiting on it with this error.
    case closed
    /// Nothing accepts connections at the address (`ECONNREFUSED`).
    case connectionRefused
    /// The peer reset or closed the connection while data was being written or read
    /// (`ECONNRESET`, `EPIPE`). The socket cannot be used for that direction any more; close it.
    case connectionReset
    /// The address is already bound by another socket (`EADDRINUSE`).
    case addressInUse
    /// A host name or address that could not be resolved or parsed.
    case invalidAddress(String)
    /// Any other failure of a system call: its name and `errno`.
    case system(operation: String, errno: Int32)

    /// Maps the `errno` of a failed system call to the matching case.
    init(errno code: Int32, operation: String) {
        switch code {
        case ECONNRESET, EPIPE: self = .connectionReset
        case ECONNREFUSED: self = .connectionRefused
        case EADDRINUSE: self = .addressInUse
        case EBADF: self = .closed
        default: self = .system(operation: operation, errno: code)
        }
    }

    /// A sentence saying what happened and what to do.
    public var description: String {
        switch self {
        case .busy:
            return "socket busy: another coroutine is already reading or writing; use one reader and one writer per socket"
        case .closed:
            return "socket closed"
        case .connectionRefused:
            return "connection refused: nothing listens at that address"
        case .connectionReset:
            return "connection reset by peer: close this socket"
        case .addressInUse:
            return "address already in use: pick another port, or port 0 for an ephemeral one"
        case .invalidAddress(let text):
            return "invalid address: \(text)"
        case .system(let operation, let code):
            return "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}
