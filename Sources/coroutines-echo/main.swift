// coroutines-echo: a TCP echo server with a coroutine per connection, spread across the default
// SchedulerPool (one scheduler thread per active processor) — the way Go serves connections.
//
//     swift run -c release coroutines-echo [port] [host]      (defaults: 7777 0.0.0.0)
//
// Ctrl-C (SIGINT) stops accepting, closes the listener and exits.
import CoroutinesFoundation
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let arguments = CommandLine.arguments
guard let port = arguments.count > 1 ? Int(arguments[1]) : 7777, (0...65535).contains(port) else {
    print("usage: coroutines-echo [port] [host]")
    exit(2)
}
let host = arguments.count > 2 ? arguments[2] : "0.0.0.0"

let pool = SchedulerPool.default(for: .default)
let listener: TCPListener
do {
    listener = try TCPListener.bind(host: host, port: port)
} catch {
    print("coroutines-echo: cannot listen on \(host):\(port): \(error)")
    exit(1)
}
print("coroutines-echo listening on \(listener.localAddress), \(pool.schedulers.count) schedulers; Ctrl-C stops")

// SIGINT closes the listener, which wakes the accept loop with SocketError.closed.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
interrupt.setEventHandler { @Sendable [listener] in listener.close() }
interrupt.resume()

let served = Atomic<Int>(0)

/// Echoes everything the peer sends until it closes or fails.
@Sendable func serve(_ connection: TCPSocket) {
    defer { connection.close() }
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    do {
        while true {
            let n = try buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
            if n == 0 { return }
            try buffer.withUnsafeBytes { try connection.write(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        }
    } catch SocketError.connectionReset {
        // The peer went away; nothing to report.
    } catch {
        print("connection \(connection.remoteAddress): \(error)")
    }
}

try Coroutine.runBlocking {
    while true {
        let connection: TCPSocket
        do {
            connection = try listener.accept()
        } catch SocketError.closed {
            break
        }
        served.add(1, ordering: .relaxed)
        Coroutine.launch(on: pool.next(), name: "echo \(connection.remoteAddress)") { serve(connection) }
    }
}
print("\ncoroutines-echo stopped after \(served.load(ordering: .relaxed)) connections")
