import Coroutines
import CoroutinesFoundation
import Foundation
import Synchronization
import Testing
import CoroutinesTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// TCP sockets under churn and races: reads that time out and resume, peers that reset, readers
/// cancelled while their socket is closed from another thread and its number reused at once, on
/// the persistent edge-triggered registrations (<doc:Sockets>).
///
/// Serialized: each test loads the machine on its own (threads, descriptors). .ci/run runs the
/// stress suites apart from the others under ThreadSanitizer.
@Suite("TCP sockets under churn and races", .serialized)
struct SocketStressTests {
    /// From the tests written against the persistent edge-triggered socket registrations.
    @Test("many connections on two schedulers: reads time out and resume, peers reset mid-stream; the stream stays intact and nothing hangs")
    func churnWithTimeoutsCancelsAndResets() async throws {
        let a = CoroutineScheduler(name: "churn-a")
        let b = CoroutineScheduler(name: "churn-b")
        defer { a.stop(); b.stop() }
        let intact = Mutex(0)
        let failures = Mutex<[String]>([])
        try await Coroutine.run {
            // Server: for connection k, sends 64 KiB of a pattern in slow chunks; every fifth
            // connection is reset half-way.
            let server = try LoopbackServer(name: "churn", acceptOn: a, connectionOn: { n in n % 2 == 0 ? a : b }) { c in
                let hello = try readExactly(c, 4)
                let id = Int(hello[0]) | Int(hello[1]) << 8
                for chunk in 0..<16 {
                    if id % 5 == 0 && chunk == 8 {
                        setResetOnClose(c)
                        return
                    }
                    let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &+ chunk &* 7 &+ id) }
                    do { try c.write(bytes) } catch { return }
                    if chunk % 4 == 0 { try Coroutine.delay(.milliseconds(1)) }
                }
            }
            try withLoopbackServer(server) { server in
                let clients = (0..<120).map { id in
                    Coroutine.launch(on: id % 2 == 0 ? b : a) {
                        let s = try server.connect()
                        defer { s.close() }
                        try s.write([UInt8(id & 0xff), UInt8(id >> 8), 0, 0])
                        var received: [UInt8] = []
                        var timeouts = 0
                        do {
                            while received.count < 16 * 4096 {
                                do {
                                    let chunk = try Coroutine.withTimeout(.microseconds(200)) { try s.read(upTo: 1000) }
                                    if chunk.isEmpty { break }
                                    received += chunk
                                } catch CoroutineError.timedOut {
                                    timeouts += 1   // the next read must still see every byte
                                }
                            }
                        } catch let e as SocketError {
                            if id % 5 != 0 { failures.locked { $0.append("client \(id): \(e)") } }
                            return
                        }
                        if id % 5 == 0 { return }   // reset: any prefix is fine
                        let expected = (0..<16).flatMap { chunk in (0..<4096).map { UInt8(truncatingIfNeeded: $0 &+ chunk &* 7 &+ id) } }
                        if received == expected { intact.locked { $0 += 1 } }
                        else { failures.locked { $0.append("client \(id): \(received.count) bytes, corrupt or short") } }
                    }
                }
                try Coroutine.withTimeout(hangBound) {
                    for c in clients { try c.join() }
                }
            }
        }
        #expect(failures.locked { $0 } == [])
        #expect(intact.locked { $0 } == 96)
    }

    /// From the tests written against the persistent edge-triggered socket registrations.
    @Test("a reader cancelled, its socket closed from a plain thread and the number reused at once, in a loop")
    func cancelCloseReuseLoop() async throws {
        let s = CoroutineScheduler(name: "reuse-loop")
        defer { s.stop() }
        try await Coroutine.run {
            try withEchoServer { server in
                for round in 0..<150 {
                    let sock = try Coroutine.async(on: s) { try server.connect() }.await()
                    let reader = Coroutine.async(on: s) { () -> String in
                        do { _ = try sock.read(upTo: 10); return "read" }
                        catch is CancellationError { return "cancelled" }
                        catch SocketError.closed { return "closed" }
                    }
                    try Coroutine.delay(.microseconds(Int64(round % 5) * 50))
                    if round % 2 == 0 { reader.cancel() }
                    let t = Thread { sock.close() }
                    t.start()
                    let r = try? reader.await()
                    if r == "read" { Issue.record("round \(round): a read returned without data") }
                    // A fresh socket likely gets the same number: it must work on the same scheduler.
                    let echoed = try Coroutine.async(on: s) { () -> [UInt8] in
                        let fresh = try server.connect()
                        defer { fresh.close() }
                        try fresh.write("r\(round)")
                        return try Coroutine.withTimeout(hangBound) { try readExactly(fresh, "r\(round)".utf8.count) }
                    }.await()
                    #expect(echoed == Array("r\(round)".utf8))
                }
            }
        }
    }
}
