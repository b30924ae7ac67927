import Testing
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import CoroutinesFoundation
import CoroutinesTestSupport

@Suite("URLSession against a server on 127.0.0.1")
struct URLSessionTests {
    @Test("GET: 200 with a body")
    func ok() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let (body, status) = try await Coroutine.run {
            let (data, response) = try URLSession.shared.data(from: server.url("/hello"))
            return (String(decoding: data, as: UTF8.self), (response as? HTTPURLResponse)?.statusCode)
        }
        #expect(status == 200)
        #expect(body == "hello, coroutines")
    }

    @Test("GET: a 404 status is a response, not an error")
    func notFound() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let (body, status) = try await Coroutine.run {
            let (data, response) = try URLSession.shared.data(for: URLRequest(url: server.url("/missing")))
            return (String(decoding: data, as: UTF8.self), (response as? HTTPURLResponse)?.statusCode)
        }
        #expect(status == 404)
        #expect(body == "not found")
    }

    @Test("a refused connection throws URLError.cannotConnectToHost")
    func refused() async throws {
        let port = try TestHTTPServer.refusingPort()
        let code = try await Coroutine.run {
            do {
                _ = try URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/")!)
                return nil as URLError.Code?
            } catch let e as URLError { return e.code }
        }
        #expect(code == .cannotConnectToHost)
    }

    @Test("upload from memory and from a file, download to a file")
    func uploadAndDownload() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let (echoed, echoedFile, downloaded) = try await Coroutine.run {
            var request = URLRequest(url: server.url("/echo"))
            request.httpMethod = "POST"
            let (echoed, _) = try URLSession.shared.upload(for: request, from: payload)
            try payload.save(to: dir.file("payload.bin"))
            let (echoedFile, _) = try URLSession.shared.upload(for: request, fromFile: dir.file("payload.bin"))
            let (location, response) = try URLSession.shared.download(from: server.url("/hello"))
            defer { try? FileManager.default.removeItem(at: location) }
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            return (echoed, echoedFile, try String.read(contentsOf: location))
        }
        #expect(echoed == payload)
        #expect(echoedFile == payload)
        #expect(downloaded == "hello, coroutines")
    }

    @Test("cancelling the coroutine cancels the task: CancellationError at once, connection closed")
    func cancellation() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let (error, closed) = try await Coroutine.run {
            // Given a coroutine waiting for a response that never comes
            let waiter = Coroutine.launch { _ = try URLSession.shared.data(from: server.url("/slow")) }
            try server.slowArrived.await()
            // When it is cancelled
            waiter.cancel()
            try Coroutine.withTimeout(hangBound) { try waiter.join() }
            // Then it throws CancellationError, and the session drops the connection
            let closed: Bool
            do { try server.slowClosed.timeout(hangBound).await(); closed = true } catch { closed = false }
            return (waiter.error, closed)
        }
        #expect(error is CancellationError)
        #expect(closed)
    }

    @Test("outside a coroutine it throws notInCoroutine")
    func outside() throws {
        #expect(throws: CoroutineError.notInCoroutine) {
            _ = try URLSession.shared.data(from: URL(string: "http://127.0.0.1:9/")!)
        }
    }
}
