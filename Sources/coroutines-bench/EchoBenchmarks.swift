import CoroutinesFoundation
import Dispatch

// MARK: echo — N loopback clients × M round trips; requests/s (larger is better) and p99

let echoClients = 100
let echoRoundTrips = 1_000

/// Our server: `TCPListener` + a coroutine per connection across the default `SchedulerPool`
/// (one scheduler thread per active processor), the `coroutines-echo` example in-process.
/// `COROUTINES_ECHO_SCHEDULERS=n` gives the server a pool of `n` schedulers instead (the client
/// runs on a thread of its own either way).
func coroutineEcho() throws -> Double {
    let pool: SchedulerPool
    if let n = getenv("COROUTINES_ECHO_SCHEDULERS").flatMap({ Int(String(cString: $0)) }), n > 0,
       let sized = SchedulerPool(name: "echo-server", count: n) {
        pool = sized
    } else {
        pool = SchedulerPool.default(for: .default)
    }
    let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
    let acceptor = Coroutine.launch(on: pool.next(), name: "echo-accept") {
        while true {
            let connection: TCPSocket
            do { connection = try listener.accept() } catch SocketError.closed { return }
            Coroutine.launch(on: pool.next(), name: "echo-connection") {
                defer { connection.close() }
                var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                while true {
                    let n = try buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
                    if n == 0 { return }
                    try buffer.withUnsafeBytes { try connection.write(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
                }
            }
        }
    }
    defer {
        listener.close()
        try? Coroutine.runBlocking { try acceptor.join() }
    }
    let figures = try runEchoLoad(host: "127.0.0.1", port: listener.port, clients: echoClients, roundTrips: echoRoundTrips)
    recordSecondary("echo (coroutine per connection)", figures.p99Microseconds, unit: "µs p99")
    return figures.requestsPerSecond
}

/// The Swift-concurrency peer: a task per connection in a `withDiscardingTaskGroup`, on
/// non-blocking descriptors whose readiness a dedicated epoll/kqueue thread reports by resuming
/// `UnsafeContinuation`s (the same poll shim our schedulers use). No thread blocks on a socket.
func taskEcho() throws -> Double {
    let server = try PeerEchoServer()
    defer { server.stop() }
    let figures = try runEchoLoad(host: "127.0.0.1", port: server.port, clients: echoClients, roundTrips: echoRoundTrips)
    recordSecondary("swift: task per connection", figures.p99Microseconds, unit: "µs p99")
    return figures.requestsPerSecond
}

/// `coroutines-bench --echo-client HOST PORT [clients] [roundTrips]`: the same client load against
/// an external server (`Scripts/echo-vs-go.sh` points it at Go's and at `coroutines-echo`).
func runEchoClientCommand(_ arguments: [String]) throws {
    guard arguments.count >= 2, let port = Int(arguments[1]) else {
        emit("usage: coroutines-bench --echo-client HOST PORT [clients] [roundTrips] [runs]")
        exit(2)
    }
    let clients = arguments.count > 2 ? Int(arguments[2]) ?? echoClients : echoClients
    let roundTrips = arguments.count > 3 ? Int(arguments[3]) ?? echoRoundTrips : echoRoundTrips
    let runs = arguments.count > 4 ? Int(arguments[4]) ?? 5 : 5
    _ = try runEchoLoad(host: arguments[0], port: port, clients: clients, roundTrips: roundTrips)  // warm-up
    var rates: [Double] = [], p99s: [Double] = []
    for _ in 0..<runs {
        let f = try runEchoLoad(host: arguments[0], port: port, clients: clients, roundTrips: roundTrips)
        rates.append(f.requestsPerSecond)
        p99s.append(f.p99Microseconds)
    }
    rates.sort(); p99s.sort()
    emit("requests/s median=\(format(rates[runs / 2])) (\(format(rates.first!))…\(format(rates.last!)))  p99 median=\(format(p99s[runs / 2])) µs  clients=\(clients) roundTrips=\(roundTrips) runs=\(runs)")
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
