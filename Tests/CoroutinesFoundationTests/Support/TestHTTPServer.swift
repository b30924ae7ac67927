import Foundation
import Synchronization
import CoroutinesFoundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for the URLSession tests: one `Thread` accepts, one
/// `Thread` per connection answers one request and closes. Nothing leaves the machine.
///
/// Routes: `GET /hello` → 200 "hello, coroutines"; `POST /echo` → 200 with the request body;
/// `GET /slow` → never answers: fulfils ``slowArrived``, then waits until the client closes the
/// connection and fulfils ``slowClosed``; anything else → 404 "not found".
final class TestHTTPServer: Sendable {
    let port: UInt16
    let slowArrived = Promise<Void>()
    let slowClosed = Promise<Void>()
    private let listener: Int32

    init() throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        port = try Self.bindLoopback(listener)
        guard listen(listener, 64) == 0 else { throw POSIXError(.EIO) }
        let fd = listener
        let server = self
        let thread = Thread { server.acceptLoop(fd) }
        thread.name = "TestHTTPServer"
        thread.start()
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// Stops accepting; connections in progress finish on their own threads.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// A port on 127.0.0.1 where nothing listens (bound, then closed).
    static func refusingPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        return try bindLoopback(fd)
    }

    private static func bindLoopback(_ fd: Int32) throws -> UInt16 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    private func acceptLoop(_ fd: Int32) {
        while true {
            let connection = accept(fd, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        guard let (requestLine, body) = readRequest(fd) else { return }
        let parts = requestLine.split(separator: " ")
        guard parts.count >= 2 else { return }
        switch (parts[0], parts[1]) {
        case ("GET", "/hello"):
            respond(fd, status: "200 OK", body: Data("hello, coroutines".utf8))
        case ("POST", "/echo"), ("PUT", "/echo"):
            respond(fd, status: "200 OK", body: body)
        case ("GET", "/slow"):
            slowArrived.fulfill(())
            var byte: UInt8 = 0
            while recv(fd, &byte, 1, 0) > 0 {}
            slowClosed.fulfill(())
        default:
            respond(fd, status: "404 Not Found", body: Data("not found".utf8))
        }
    }

    /// Reads the head and a `Content-Length` body; returns the request line and the body.
    private func readRequest(_ fd: Int32) -> (String, Data)? {
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        let separator = Data("\r\n\r\n".utf8)
        while buffer.range(of: separator) == nil {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
        let headEnd = buffer.range(of: separator)!
        let head = String(decoding: buffer[..<headEnd.lowerBound], as: UTF8.self)
        var body = Data(buffer[headEnd.upperBound...])
        let lines = head.components(separatedBy: "\r\n")
        let length = lines.dropFirst().compactMap { line -> Int? in
            let pair = line.split(separator: ":", maxSplits: 1)
            guard pair.count == 2, pair[0].lowercased() == "content-length" else { return nil }
            return Int(pair[1].trimmingCharacters(in: .whitespaces))
        }.first ?? 0
        while body.count < length {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { return nil }
            body.append(contentsOf: chunk[0..<n])
        }
        return (lines[0], body)
    }

    #if os(Linux)
    private let noSignal = Int32(MSG_NOSIGNAL)
    #else
    private let noSignal: Int32 = 0
    #endif

    private func respond(_ fd: Int32, status: String, body: Data) {
        var response = Data("HTTP/1.1 \(status)\r\nContent-Length: \(body.count)\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n".utf8)
        response.append(body)
        response.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = send(fd, raw.baseAddress! + sent, raw.count - sent, noSignal)
                if n <= 0 { return }
                sent += n
            }
        }
    }
}
