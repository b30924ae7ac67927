import CoroutinesFoundation

/// What one echo load measured.
struct EchoFigures {
    let requestsPerSecond: Double
    let p99Microseconds: Double
}

/// Per-round-trip latencies, one slice per client. Every client runs on the one scheduler thread
/// that drives the load, so the slices are written without locks.
final class LatencyLog: @unchecked Sendable {
    let values: UnsafeMutableBufferPointer<UInt64>
    init(count: Int) { values = .allocate(capacity: count); values.initialize(repeating: 0) }
    deinit { values.deallocate() }
}

/// The client load of the `echo` benchmark, the same against every server: `clients` coroutines
/// on the calling thread's scheduler (one thread), each connected once, each doing `roundTrips`
/// write-then-read-back exchanges of a `messageSize`-byte message. The clock runs from the moment
/// every client is connected until the last echo arrived.
///
/// Must be called on a plain thread (it uses `Coroutine.runBlocking`).
func runEchoLoad(host: String, port: Int, clients: Int, roundTrips: Int, messageSize: Int = 64) throws -> EchoFigures {
    let log = LatencyLog(count: clients * roundTrips)
    let elapsed = try Coroutine.runBlocking { () -> UInt64 in
        let gate = Promise<Void>()
        let connected = WaitGroup()
        connected.add(clients)
        let all = (0..<clients).map { client in
            Coroutine.launch(name: "echo-client-\(client)") {
                let socket: TCPSocket
                do { socket = try TCPSocket.connect(host: host, port: port) } catch { connected.done(); throw error }
                defer { socket.close() }
                connected.done()
                try gate.await()
                let message = [UInt8](repeating: UInt8(truncatingIfNeeded: client), count: messageSize)
                // Room for more than one reply, as a real client reads (its reads come back short).
                var reply = [UInt8](repeating: 0, count: max(4096, messageSize))
                let slice = log.values.baseAddress! + client * roundTrips
                for i in 0..<roundTrips {
                    let t0 = now()
                    try socket.write(message)
                    var got = 0
                    while got < messageSize {
                        let n = try reply.withUnsafeMutableBytes { raw in
                            try socket.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[got...]))
                        }
                        precondition(got + n <= messageSize, "the server echoed more than was sent")
                        if n == 0 { throw SocketError.connectionReset }
                        got += n
                    }
                    precondition(reply[0] == message[0], "echo returned someone else's bytes")
                    slice[i] = now() - t0
                }
            }
        }
        try connected.wait()
        let t0 = now()
        gate.fulfill(())
        for c in all { try c.join() }
        let t1 = now()
        if let error = all.lazy.compactMap(\.error).first { throw error }
        return t1 - t0
    }
    let sorted = log.values.sorted()
    let p99 = sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
    return EchoFigures(requestsPerSecond: Double(clients * roundTrips) / (Double(elapsed) / 1e9),
                       p99Microseconds: Double(p99) / 1000)
}
