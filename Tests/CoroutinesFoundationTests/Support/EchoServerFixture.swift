import Coroutines
import CoroutinesFoundation
import Foundation
import Synchronization

/// An in-process server on loopback, port 0: one accept loop, a coroutine per connection running
/// `serve`. Prefer ``withEchoServer(pool:_:)`` / ``withLoopbackServer(_:_:)``, which stop it
/// even when the test throws. Start and stop it inside a coroutine.
final class LoopbackServer: Sendable {
    let listener: TCPListener
    let acceptor: Coroutine
    /// Connections whose coroutine has not finished yet.
    let connections = WaitGroup()
    /// Server-side socket inodes, for the leak check.
    let inodes = InodeLog()
    /// The clients ``connect()`` made, closed by ``stop()``.
    private let clients = Mutex<[TCPSocket]>([])

    /// - Parameters:
    ///   - name: Prefix of the coroutine names (`<name>-accept`, `<name>-connection`).
    ///   - acceptOn: Where the accept loop runs.
    ///   - connectionOn: Where the coroutine of the n-th accepted connection (from 0) runs.
    ///   - serve: Handles one connection; the socket is closed when it returns or throws.
    init(name: String, acceptOn: CoroutineScheduler,
         connectionOn: @escaping @Sendable (_ n: Int) -> CoroutineScheduler,
         serve: @escaping @Sendable (TCPSocket) throws -> Void) throws {
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
        self.listener = listener
        let connections = self.connections
        let inodes = self.inodes
        acceptor = Coroutine.launch(on: acceptOn, name: "\(name)-accept") {
            var n = 0
            while true {
                let connection: TCPSocket
                do { connection = try listener.accept() } catch SocketError.closed { return }
                inodes.record(connection)
                connections.add()
                Coroutine.launch(on: connectionOn(n), name: "\(name)-connection") {
                    defer { connection.close(); connections.done() }
                    try serve(connection)
                }
                n += 1
            }
        }
    }

    /// An echo server: a coroutine per connection across `pool`, echoing every byte until EOF.
    static func echo(pool: SchedulerPool) throws -> LoopbackServer {
        try LoopbackServer(name: "echo", acceptOn: pool.next(), connectionOn: { _ in pool.next() }) { connection in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = try buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
                if n == 0 { return }
                try buffer.withUnsafeBytes { try connection.write(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
        }
    }

    var port: Int { listener.port }

    /// A client connected to this server, closed by ``stop()`` at the latest.
    func connect() throws -> TCPSocket {
        let socket = try TCPSocket.connect(host: "127.0.0.1", port: port)
        clients.locked { $0.append(socket) }
        return socket
    }

    /// Closes the clients of ``connect()`` (close is idempotent) and the listener, then waits for
    /// the acceptor and every connection coroutine.
    func stop() throws {
        for client in clients.locked({ $0 }) { client.close() }
        listener.close()
        try acceptor.join()
        try connections.wait()
    }
}

/// Runs `body` with `server`, then stops it (``LoopbackServer/stop()``): also when `body` throws,
/// so that no listener, client or server coroutine outlives the test. Inside a coroutine.
func withLoopbackServer<T>(_ server: LoopbackServer, _ body: (LoopbackServer) throws -> T) throws -> T {
    var stopped = false
    defer { if !stopped { try? server.stop() } }   // `body` threw: its error is the one reported
    let result = try body(server)
    stopped = true
    try server.stop()
    return result
}

/// Starts an echo server on 127.0.0.1 across `pool` and runs `body` with it; see
/// ``withLoopbackServer(_:_:)``. Connect clients with ``LoopbackServer/connect()``.
func withEchoServer<T>(pool: SchedulerPool = .default(for: .default),
                       _ body: (LoopbackServer) throws -> T) throws -> T {
    try withLoopbackServer(.echo(pool: pool), body)
}

/// A client connected to a listener on `host` (a new one on port 0 unless `listener` is given)
/// and the connection the listener accepted for it. Runs `body` with both, then closes the
/// client, the accepted connection and the listener, also when `body` throws. Inside a coroutine.
func withConnectedPair<T>(host: String = "127.0.0.1", listener: TCPListener? = nil,
                          _ body: (_ client: TCPSocket, _ accepted: TCPSocket) throws -> T) throws -> T {
    let listener = try listener ?? TCPListener.bind(host: host, port: 0)
    defer { listener.close() }
    let client = try TCPSocket.connect(host: host, port: listener.port)
    defer { client.close() }
    let accepted = try listener.accept()
    defer { accepted.close() }
    return try body(client, accepted)
}
