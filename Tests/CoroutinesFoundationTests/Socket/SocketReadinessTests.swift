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

/// Sockets wait through persistent edge-triggered registrations, one per scheduler they are used
/// on (`PollDescriptor`): these tests cover their interplay with schedulers, close and reuse.
@Suite("TCP sockets: edge-triggered readiness")
struct SocketReadinessTests {
    @Test("one socket read and written from coroutines on two schedulers in turn")
    func socketOnTwoSchedulersInTurn() async throws {
        let a = CoroutineScheduler(name: "socket-a")
        let b = CoroutineScheduler(name: "socket-b")
        defer { a.stop(); b.stop() }
        try await Coroutine.run {
            try withEchoServer { server in
                let socket = try server.connect()
                for round in 0..<40 {
                    // Alternating schedulers; each keeps its registration (and possibly stale
                    // readiness) while the other one is used.
                    let scheduler = round % 2 == 0 ? a : b
                    let message = Array("round \(round)".utf8)
                    let echoed = try Coroutine.async(on: scheduler) { () -> [UInt8] in
                        try socket.write(message)
                        return try Coroutine.withTimeout(hangBound) { try readExactly(socket, message.count) }
                    }.await()
                    #expect(echoed == message)
                }
                // A reader on one scheduler and a writer on the other at the same time.
                let reader = Coroutine.async(on: a) { () -> [UInt8] in
                    try Coroutine.withTimeout(hangBound) { try readExactly(socket, 5) }
                }
                try Coroutine.async(on: b) { try socket.write("hello") }.await()
                #expect(try reader.await() == Array("hello".utf8))
            }
        }
    }

    @Test("close from a plain thread during a wait ends it with closed; new sockets reusing the numbers work on the same scheduler")
    func closeFromPlainThreadThenReuse() async throws {
        let scheduler = CoroutineScheduler(name: "socket-close")
        defer { scheduler.stop() }
        try await Coroutine.run {
            try withEchoServer { server in
                for _ in 0..<30 {
                    let socket = try server.connect()
                    let parked = Promise<Coroutine>()
                    // async, not launch: the reader ends with SocketError.closed, which a launched
                    // coroutine would also report as unobserved.
                    let reader = Coroutine.async(on: scheduler, name: "parked-reader") {
                        // The first read registers the socket on this scheduler and finds nothing.
                        #expect(throws: CoroutineError.timedOut) {
                            try Coroutine.withTimeout(.milliseconds(1)) { _ = try socket.read(upTo: 16) }
                        }
                        parked.fulfill(Coroutine.current!)
                        _ = try socket.read(upTo: 16)
                    }
                    try waitUntilSuspended(try parked.await(), in: .readable)
                    let closed = DispatchSemaphore(value: 0)
                    Thread { socket.close(); closed.signal() }.start()
                    closed.wait()
                    #expect(throws: SocketError.closed) { try reader.await() }
                    // The next connection most likely gets the same descriptor number: its
                    // registration on this scheduler must start clean and work.
                    let next = try server.connect()
                    let echoed = try Coroutine.async(on: scheduler) { () -> [UInt8] in
                        try next.write("again")
                        return try Coroutine.withTimeout(hangBound) { try readExactly(next, 5) }
                    }.await()
                    #expect(echoed == Array("again".utf8))
                    next.close()
                }
            }
        }
    }

    @Test("a read cancelled or timed out while it waits leaves the socket usable for the next read")
    func interruptedReadsThenSuccess() async throws {
        let scheduler = CoroutineScheduler(name: "socket-interrupt")
        defer { scheduler.stop() }
        try await Coroutine.run {
            try withEchoServer { server in
                let socket = try server.connect()
                for round in 0..<20 {
                    let reader = Coroutine.launch(on: scheduler, name: "interrupted-reader") { _ = try socket.read(upTo: 16) }
                    if round % 2 == 0 {
                        try waitUntilSuspended(reader, in: .readable)
                        reader.cancel()
                        try reader.join()
                        #expect(reader.error is CancellationError)
                    } else {
                        reader.cancel(after: .milliseconds(2))
                        try reader.join()
                        #expect(reader.error is CancellationError)
                    }
                    let echoed = try Coroutine.async(on: scheduler) { () -> [UInt8] in
                        #expect(throws: CoroutineError.timedOut) {
                            try Coroutine.withTimeout(.milliseconds(2)) { _ = try socket.read(upTo: 16) }
                        }
                        try socket.write("r\(round)")
                        return try Coroutine.withTimeout(hangBound) { try readExactly(socket, "r\(round)".utf8.count) }
                    }.await()
                    #expect(echoed == Array("r\(round)".utf8))
                }
            }
        }
    }
}
