import Coroutines
import CoroutinesFoundation
import Foundation
import Synchronization
import CoroutinesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("TCP sockets on loopback")
struct SocketTests {
    // The load runs in a child process (ChildProcess.run): its 2,000 sockets would otherwise show
    // up in the descriptor counts of other suites running in parallel in this process, and the
    // child's own count before and after is then exact.

    @Test("an echo server serves 1,000 concurrent clients × 100 messages, echoing every byte and leaking no descriptor",
          .enabled(if: TestEnvironment.exitTestsEnabled))
    func echoThousandClients() async throws {
        let result = await ChildProcess.run(.success, id: "echoThousandClients") {
            let problems = try await echoThousandClientsInThisProcess()
            if !problems.isEmpty {
                FileHandle.standardError.write(Data(problems.map { "echo problem: \($0)\n" }.joined().utf8))
                exit(1)
            }
        }
        // The child exits with status 1 after printing each problem (descriptor leak, byte
        // mismatch) on a line of its own; ChildProcess.run records that as an issue.
        guard let result else { return }   // in the child process, whose test ends here
        #expect(!result.standardError.contains("echo problem:"), "child reported: \(result.standardError)")
    }

    @Test("a read inside withTimeout throws timedOut, and the socket stays usable")
    func readTimeout() async throws {
        try await Coroutine.run {
            try withEchoServer { server in
                let socket = try server.connect()
                let start = ContinuousClock.now
                #expect(throws: CoroutineError.timedOut) {
                    try Coroutine.withTimeout(.milliseconds(100)) { try socket.read(upTo: 16) }
                }
                let waited = ContinuousClock.now - start
                #expect(waited >= .milliseconds(100) && waited < hangBound)
                try socket.write("still works")
                #expect(try readExactly(socket, 11) == Array("still works".utf8))
            }
        }
    }

    @Test("a peer reset while the server writes makes the write throw connectionReset, without SIGPIPE")
    func peerResetMidWrite() async throws {
        let outcome = try await Coroutine.run { () -> String in
            try withConnectedPair { client, connection in
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
        }
        #expect(outcome == String(describing: Optional(SocketError.connectionReset)))
    }

    @Test("a second concurrent reader gets SocketError.busy; close wakes the first with SocketError.closed")
    func twoReadersAndCloseWakesReader() async throws {
        try await Coroutine.run {
            try withEchoServer { server in
                let socket = try server.connect()
                // Given: a reader blocked on this scheduler.
                let reader = try launchUntilSuspended(name: "blocked-reader", in: .readable) { _ = try socket.read(upTo: 16) }
                #expect(!reader.isFinished)
                // When / Then: a second reader is refused; a writer is not (one reader + one writer).
                #expect(throws: SocketError.busy) { try socket.read(upTo: 16) }
                socket.close()
                try reader.join()
                #expect(reader.error as? SocketError == .closed)
                #expect(throws: SocketError.closed) { try socket.write("after close") }
                socket.close()   // idempotent
            }
        }
    }

    @Test("close from another thread wakes a reader blocked on another scheduler")
    func closeFromAnotherThread() async throws {
        try await Coroutine.run {
            try withEchoServer { server in
                let socket = try server.connect()
                let started = Channel<Void>()
                let readerThread = CoroutineScheduler(name: "reader-thread")
                defer { readerThread.stop() }
                let reader = Coroutine.launch(on: readerThread, name: "reader") {
                    try started.send(())
                    _ = try socket.read(upTo: 16)
                }
                try started.receive()
                socket.close()   // before or while the reader waits: both must end in `closed`
                try reader.join()
                #expect(reader.error as? SocketError == .closed)
            }
        }
    }

    @Test("a second concurrent writer gets SocketError.busy; close wakes the blocked writer with SocketError.closed")
    func twoWritersAndCloseWakesWriter() async throws {
        try await Coroutine.run {
            // A peer that accepts and never reads: a large write fills both socket buffers and waits.
            try withConnectedPair { socket, _ in
                let writer = try launchUntilSuspended(name: "blocked-writer", in: .writable) {
                    try socket.write([UInt8](repeating: 1, count: 64 << 20))
                }
                #expect(!writer.isFinished)
                #expect(throws: SocketError.busy) { try socket.write("second writer") }
                socket.close()
                try writer.join()
                #expect(writer.error as? SocketError == .closed)
            }
        }
    }

    // In a child process: lowering the descriptor limit would break suites running in parallel.
    @Test("accept backs off while out of descriptors (EMFILE) instead of spinning, then accepts",
          .enabled(if: TestEnvironment.exitTestsEnabled))
    func acceptBacksOffOnEMFILE() async throws {
        await ChildProcess.run(.success, id: "acceptBacksOffOnEMFILE") {
            try await Coroutine.run {
                let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
                let client = try TCPSocket.connect(host: "127.0.0.1", port: listener.port)
                let pool = SchedulerPool.default(for: .default)   // its pollers need descriptors
                // Given: no descriptor left for accept (the soft limit is reached with dups).
                var filler = [Int32]()
                while true {
                    let fd = dup(0)
                    if fd < 0 { break }
                    filler.append(fd)
                    if filler.count > 1_000_000 { exit(3) }
                }
                let cpuBefore = clock()
                // On another scheduler: a spinning accept must not starve this coroutine's clock.
                let acceptor = Coroutine.launch(on: pool.next()) {
                    _ = try listener.accept()
                }
                // When: it has been out of descriptors for 300 ms.
                try Coroutine.delay(.milliseconds(300))
                let cpuUsed = Double(clock() - cpuBefore) / Double(CLOCKS_PER_SEC)
                guard !acceptor.isFinished else { exit(4) }
                // A spinning accept would burn the whole 300 ms of a core.
                guard cpuUsed < 0.15 else { exit(5) }
                // Then: once descriptors are free again, the next retry accepts.
                for fd in filler { _ = close(fd) }
                try acceptor.join()
                guard acceptor.error == nil else { exit(6) }
                client.close()
                listener.close()
            }
        }
    }

    @Test("close wakes a blocked accept with SocketError.closed")
    func closeWakesAccept() async throws {
        try await Coroutine.run {
            let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
            defer { listener.close() }   // also when the test throws (close is idempotent)
            let acceptor = try launchUntilSuspended(name: "acceptor", in: .readable) { _ = try listener.accept() }
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
            try withEchoServer { server in
                let socket = try server.connect()
                let reader = try launchUntilSuspended(name: "cancelled-reader", in: .readable) { _ = try socket.read(upTo: 16) }
                #expect(!reader.isFinished)
                reader.cancel()
                try reader.join()
                #expect(reader.error is CancellationError)
                try socket.write("ping")
                #expect(try readExactly(socket, 4) == Array("ping".utf8))
            }
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
            try withConnectedPair(host: "::1", listener: listener) { client, connection in
                try client.write("v6")
                #expect(try readExactly(connection, 2) == Array("v6".utf8))
                #expect(connection.remoteAddress.isIPv6)
            }
        }
    }
}

/// The body of the 1,000-client echo test; returns the problems found (empty: all good).
func echoThousandClientsInThisProcess() async throws -> [String] {
    // Given: 2,000+ descriptors are needed at once; the pool's pollers exist before counting.
    let limit = raiseDescriptorLimit()
    guard limit >= 2_100 else { return ["descriptor hard limit \(limit) is too low for 1,000 clients"] }
    let clients = 1_000, messages = 100
    let pool = SchedulerPool.default(for: .default)
    try await Coroutine.run {}
    let descriptorsBefore = openDescriptorCount()

    let (mismatches, failures, ours) = try await Coroutine.run { () -> (Int, [String], Set<UInt64>) in
        let mismatches = Atomic<Int>(0)
        let clientInodes = InodeLog()
        let (failures, serverInodes) = try withEchoServer(pool: pool) { server in
            // When: every client connects and sends 100 distinct messages, reading each echo.
            let all = (0..<clients).map { client in
                Coroutine.launch(on: pool.next(), name: "client-\(client)") {
                    let socket = try server.connect()
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
            return (all.compactMap(\.error).prefix(3).map { "client failed: \($0)" }, server.inodes)
        }
        // The server has stopped (withEchoServer): every connection it accepted is recorded.
        let ours = Set(clientInodes.all + serverInodes.all).subtracting([0])
        return (mismatches.load(ordering: .relaxed), Array(failures), ours)
    }

    // Then: every byte came back, and none of the 2,000 sockets is still open.
    var problems = failures
    if mismatches != 0 { problems.append("\(mismatches) echo mismatches") }
    if ours.count < 2 * clients { problems.append("only \(ours.count) socket inodes recorded, expected \(2 * clients)") }
    let stillOpen = openSocketInodes().intersection(ours)
    if !stillOpen.isEmpty { problems.append("\(stillOpen.count) descriptors of the test's sockets still open") }
    // A temporary scheduler of Coroutine.run may close its poller just after run returns.
    let descriptorsAfter = openDescriptorCount()
    if descriptorsAfter > descriptorsBefore + 4 {
        problems.append("descriptors before \(descriptorsBefore), after \(descriptorsAfter)")
    }
    return problems
}
