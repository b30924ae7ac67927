import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Suspending forms of `URLSession`'s data, download and upload tasks (see <doc:FoundationWork>).
///
/// Each method starts a task with a completion handler and suspends the calling coroutine until
/// the handler runs: no thread is held while waiting, and the scheduler keeps running its other
/// coroutines. The coroutine resumes on its own scheduler.
///
/// The names match Foundation's `async` methods; inside a coroutine (synchronous code) these
/// overloads are the ones chosen.
///
/// ## Cancellation
/// Cancelling the waiting coroutine (or an expiring `withTimeout`) cancels the `URLSessionTask`
/// and makes the call throw `CancellationError` (or `CoroutineError.timedOut`) at once. If the
/// task had already completed, its result is returned normally (see <doc:FoundationWork>).
///
/// ## Errors
/// Transport failures are Foundation's `URLError` (`.cannotConnectToHost` for a refused
/// connection, …). An HTTP error status is not an error: read it from the response
/// (`(response as? HTTPURLResponse)?.statusCode`).
extension URLSession {
    /// Loads a request's response body into memory.
    ///
    /// ```swift
    /// let (body, response) = try URLSession.shared.data(for: URLRequest(url: url))
    /// ```
    ///
    /// - Parameter request: The request.
    /// - Returns: The body (empty if there was none) and the response.
    /// - Throws: `URLError`; `CancellationError`; `CoroutineError.timedOut`;
    ///   `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(body size).
    public func data(for request: URLRequest) throws -> (Data, URLResponse) {
        try perform { complete in
            dataTask(with: request) { data, response, error in
                complete(Self.outcome(data ?? Data(), response, error))
            }
        }
    }

    /// Loads a URL's response body into memory: ``data(for:)`` with a GET request.
    ///
    /// - Parameter url: The URL to load.
    /// - Returns: The body (empty if there was none) and the response.
    /// - Throws: As ``data(for:)``.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(body size).
    public func data(from url: URL) throws -> (Data, URLResponse) {
        try data(for: URLRequest(url: url))
    }

    /// Downloads a request's response body to a file.
    ///
    /// The file is moved out of the session's temporary location before the completion handler
    /// returns, to a new file in `FileManager.default.temporaryDirectory` that the caller owns
    /// (move it or remove it).
    ///
    /// - Parameter request: The request.
    /// - Returns: The file's URL and the response.
    /// - Throws: `URLError`; the `CocoaError` of moving the file; `CancellationError`;
    ///   `CoroutineError.timedOut`; `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(body size), written to disk by the session.
    public func download(for request: URLRequest) throws -> (URL, URLResponse) {
        try perform { complete in
            downloadTask(with: request) { location, response, error in
                if let error { complete(.failure(error)); return }
                guard let location else { complete(.failure(URLError(.cannotOpenFile))); return }
                let kept = FileManager.default.temporaryDirectory
                    .appendingPathComponent("download-\(UUID().uuidString)")
                do {
                    try FileManager.default.moveItem(at: location, to: kept)
                    complete(Self.outcome(kept, response, nil))
                } catch {
                    complete(.failure(error))
                }
            }
        }
    }

    /// Downloads a URL to a file: ``download(for:)`` with a GET request.
    ///
    /// - Parameter url: The URL to load.
    /// - Returns: A file the caller owns, and the response.
    /// - Throws: As ``download(for:)``.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(body size), written to disk by the session.
    public func download(from url: URL) throws -> (URL, URLResponse) {
        try download(for: URLRequest(url: url))
    }

    /// Uploads a body with a request (its method is typically POST or PUT) and loads the
    /// response body.
    ///
    /// - Parameters:
    ///   - request: The request; its own `httpBody` is ignored.
    ///   - body: The bytes to send.
    /// - Returns: The response body and the response.
    /// - Throws: `URLError`; `CancellationError`; `CoroutineError.timedOut`;
    ///   `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(body size + response size).
    public func upload(for request: URLRequest, from body: Data) throws -> (Data, URLResponse) {
        try perform { complete in
            uploadTask(with: request, from: body) { data, response, error in
                complete(Self.outcome(data ?? Data(), response, error))
            }
        }
    }

    /// Uploads a file's contents with a request and loads the response body.
    ///
    /// - Parameters:
    ///   - request: The request; its own `httpBody` is ignored.
    ///   - fileURL: The file to send.
    /// - Returns: The response body and the response.
    /// - Throws: `URLError`; `CancellationError`; `CoroutineError.timedOut`;
    ///   `CoroutineError.notInCoroutine` outside a coroutine.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(file size + response size).
    public func upload(for request: URLRequest, fromFile fileURL: URL) throws -> (Data, URLResponse) {
        try perform { complete in
            uploadTask(with: request, fromFile: fileURL) { data, response, error in
                complete(Self.outcome(data ?? Data(), response, error))
            }
        }
    }

    /// Starts the task `makeTask` creates and suspends the coroutine until the task's completion
    /// handler calls `complete`; cancellation or an expiring `withTimeout` cancels the task (on
    /// the coroutine's thread) and throws at once.
    private func perform<Body: Sendable>(
        _ makeTask: (_ complete: @escaping @Sendable (Result<(Body, UncheckedSendable<URLResponse>), any Error>) -> Void) -> URLSessionTask
    ) throws -> (Body, URLResponse) {
        var task: URLSessionTask?
        let (body, response) = try Coroutine.suspend(waitingFor: .callback, { complete in
            let t = makeTask(complete)
            task = t
            t.resume()
        }, onInterrupt: { task?.cancel() })
        return (body, response.value)
    }

    /// A completion handler's arguments as a result.
    private static func outcome<Value: Sendable>(
        _ value: Value, _ response: URLResponse?, _ error: (any Error)?
    ) -> Result<(Value, UncheckedSendable<URLResponse>), any Error> {
        if let error { return .failure(error) }
        guard let response else { return .failure(URLError(.badServerResponse)) }
        // A URLResponse is immutable once delivered.
        return .success((value, UncheckedSendable(response)))
    }
}
