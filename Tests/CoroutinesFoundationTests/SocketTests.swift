import Coroutines
import CoroutinesFoundation
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("TCP sockets on loopback")
struct SocketTests {
    @Test("an echo server serves 1,000 concurrent clients × 100 messages, echoing every byte and leaking no descriptor")
    func echoThousandClients() async throws {
        // Given: 2,000+ descriptors are needed at once.
        let limit = raiseDescriptorLimit()
        try #require(limit >= 2_100, "descriptor hard limit \(limit) is too low for 1,000 clients")
        let clients = 1_000, messages = 100
        let descriptorsBefore = openDescriptorCount()

        let (mismatches, ours) = try await Coroutine.run { () -> (Int, Set<UInt64>) in
            let pool = SchedulerPool.default(for: .default)
            let server = try EchoServer(pool: pool)
            let mismatches = Atomic<Int>(0)
            let clientInodes = InodeLog()
            // When: every client connects and sends 100 distinct messages, reading each echo.
            let all = (0..<clients).map { client in
                Coroutine.launch(on: pool.next(), name: "client-\(client)") {
                    let socket = try TCPSocket.connect(host: "127.0.0.1", port: server.port)
                    defer { socket.close() }
                    clientInodes.record(socket)
                    for m in 0..<messages {
                        let message = Array("client \(client) message \(m) ".utf8) + [UInt8](repeating: UInt8(m), count: m % 40)
                        try socket.write(message)
                        if try readExactly(socket, message.count) != message {
                            mismatches.add(1, ordering: .relaxed)
                        }
                    }
                }
            }
            for c in all { try c.join() }
            let failed = all.compactMap(\.error)
            #expect(failed.isEmpty, "clients failed: \(failed.prefix(3))")
            try server.stop()
            let ours = Set(clientInodes.all + server.inodes.all).subtracting([0])
            return (mismatches.load(ordering: .relaxed), ours)
        }

        // Then: every byte came back, and none of the 2,000 sockets is still open.
        #expect(mismatches == 0)
        #expect(ours.count >= 2 * clients, "each client and server connection recorded its socket")
        #expect(openSocketInodes().intersection(ours).isEmpty, "a socket of the test is still open")
        // Other suites may open descriptors concurrently; the inode check above is the exact one.
        let descriptorsAfter = openDescriptorCount()
        #expect(descriptorsAfter <= descriptorsBefore + 16,
                "descriptors before \(descriptorsBefore), after \(descriptorsAfter)")
    }

    @Test("a read inside withTimeout throws timedOut, and the socket stays usable")
    func readTimeout() async throws {
        try await Coroutine.run {
            let server = try EchoServer(pool: SchedulerPool.default(for: .default))
            let socket = try TCPSocket.connect(host: "127.0.0.1", port: server.port)
            let start = ContinuousClock.now
            #expect(throws: CoroutineError.timedOut) {
                try Coroutine.withTimeout(.milliseconds(100)) { try socket.read(upTo: 16) }
            }
            let waited = ContinuousClock.now - start
            #expect(waited >= .milliseconds(100) && waited < .seconds(5))
            try socket.write("still works")
            #expect(try readExactly(socket, 11) == Array("still works".utf8))
            socket.close()
            try server.stop()
        }
    }

    @Test("a peer reset while the server writes makes the write throw connectionReset, without SIGPIPE")
    func peerResetMidWrite() async throws {
        let outcome = try await Coroutine.run { () -> String in
            let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
            defer { listener.close() }
            let client = try TCPSocket.connect(host: "127.0.0.1", port: listener.port)
            let connection = try listener.accept()
            defer { connection.close() }
            // The server writes far more than the socket buffers hold, so it waits for room.
            let writer = Coroutine.launch(name: "server-writer") {
                let chunk = [UInt8](repeating: 7, count: 1 << 20)
                for _ in 0..<256 { try connection.write(chunk) }
            }
            // Once the first bytes arrived, the write is under way: reset the connection.
            #expect(try client.read(upTo: 1).count == 1)
            setResetOnClose(client)
            client.close()
            try writer.join()
            return String(describing: writer.error.map { $0 as? SocketError } ?? nil)
        }
        #expect(outcome == String(describing: Optional(SocketError.connectionReset)))
    }

    @Test("a second concurrent reader gets SocketError.busy; close wakes the first with SocketError.closed")
    func twoReadersAndCloseWakesReader() async throws {
        try await Coroutine.run {
            let server = try EchoServer(pool: SchedulerPool.default(for: .default))
            let socket = try TCPSocket.connect(host: "127.0.0.1", port: server.port)
            // Given: a reader blocked on this scheduler (it runs until it suspends when we yield).
            let reader = Coroutine.launch(name: "blocked-reader") { _ = try socket.read(upTo: 16) }
            try Coroutine.yield()
            #expect(!reader.isFinished)
            // When / Then: a second reader is refused; a writer is not (one reader + one writer).
            #expect(throws: SocketError.busy) { try socket.read(upTo: 16) }
            socket.close()
            try reader.join()
            #expect(reader.error as? SocketError == .closed)
            #expect(throws: SocketError.closed) { try socket.write("after close") }
            socket.close()   // idempotent
            try server.stop()
        }
    }

    @Test("close from another thread wakes a reader blocked on another scheduler")
    func closeFromAnotherThread() async throws {
        try await Coroutine.run {
            let server = try EchoServer(pool: SchedulerPool.default(for: .default))
            let socket = try TCPSocket.connect(host: "127.0.0.1", port: server.port)
            let started = Channel<Void>()
            let reader = Coroutine.launch(on: CoroutineScheduler(name: "reader-thread"), name: "reader") {
                try started.send(())
                _ = try socket.read(upTo: 16)
            }
            try started.receive()
            socket.close()   // before or while the reader waits: both must end in `closed`
            try reader.join()
            #expect(reader.error as? SocketError == .closed)
            reader.scheduler.stop()
            try server.stop()
        }
    }

    @Test("close wakes a blocked accept with SocketError.closed")
    func closeWakesAccept() async throws {
        try await Coroutine.run {
            let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
            let acceptor = Coroutine.launch(name: "acceptor") { _ = try listener.accept() }
            try Coroutine.yield()
            #expect(!acceptor.isFinished)
            listener.close()
            try acceptor.join()
            #expect(acceptor.error as? SocketError == .closed)
            #expect(listener.isClosed)
        }
    }

    @Test("connecting to a port nobody listens on throws connectionRefused")
    func connectRefused() async throws {
        try await Coroutine.run {
            let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
            let port = listener.port
            listener.close()
            #expect(throws: SocketError.connectionRefused) {
                _ = try TCPSocket.connect(host: "127.0.0.1", port: port)
            }
        }
    }

    @Test("cancelling a coroutine blocked in read throws CancellationError and leaves the socket usable")
    func cancelBlockedRead() async throws {
        try await Coroutine.run {
            let server = try EchoServer(pool: SchedulerPool.default(for: .default))
            let socket = try TCPSocket.connect(host: "127.0.0.1", port: server.port)
            let reader = Coroutine.launch(name: "cancelled-reader") { _ = try socket.read(upTo: 16) }
            try Coroutine.yield()
            #expect(!reader.isFinished)
            reader.cancel()
            try reader.join()
            #expect(reader.error is CancellationError)
            try socket.write("ping")
            #expect(try readExactly(socket, 4) == Array("ping".utf8))
            socket.close()
            try server.stop()
        }
    }

    @Test("addresses parse IPv4 and IPv6 literals, and a listener works on ::1")
    func addresses() async throws {
        let v4 = try SocketAddress(host: "127.0.0.1", port: 7777)
        #expect(v4.description == "127.0.0.1:7777" && !v4.isIPv6)
        let v6 = try SocketAddress(host: "::1", port: 80)
        #expect(v6.description == "[::1]:80" && v6.isIPv6)
        #expect(throws: SocketError.self) { try SocketAddress(host: "127.0.0.1", port: 70_000) }
        // IPv6 loopback may be disabled on a CI box; only then is the round trip skipped.
        guard let listener = try? TCPListener.bind(host: "::1", port: 0) else { return }
        try await Coroutine.run {
            defer { listener.close() }
            let client = try TCPSocket.connect(host: "::1", port: listener.port)
            defer { client.close() }
            let connection = try listener.accept()
            defer { connection.close() }
            try client.write("v6")
            #expect(try readExactly(connection, 2) == Array("v6".utf8))
            #expect(connection.remoteAddress.isIPv6)
        }
    }
}
