import Foundation

extension String {
    /// Reads a text file on the blocking pool; the suspending counterpart of
    /// `String(contentsOf:encoding:)`.
    ///
    /// ```swift
    /// let text = try String.read(contentsOf: url)
    /// ```
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - encoding: The file's encoding; UTF-8 by default.
    /// - Returns: The decoded text.
    /// - Throws: The Foundation error of `String(contentsOf:encoding:)` (a missing file, bytes
    ///   that are not valid in `encoding`); `CancellationError`; `CoroutineError.notInCoroutine`
    ///   on a scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine (via ``Coroutine/offload(to:_:)``); resumes on
    ///   the coroutine's scheduler. On a plain thread it reads inline.
    /// - Complexity: O(file size).
    public static func read(contentsOf url: URL, encoding: String.Encoding = .utf8) throws -> String {
        try Coroutine.offload { try String(contentsOf: url, encoding: encoding) }
    }

    /// Writes this text to a file on the blocking pool; the suspending counterpart of
    /// `write(to:atomically:encoding:)`.
    ///
    /// ```swift
    /// try "hello\n".save(to: url)
    /// ```
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - atomically: Write to a temporary file and rename it into place; true by default.
    ///   - encoding: The encoding to write; UTF-8 by default.
    /// - Throws: The Foundation error of `write(to:atomically:encoding:)`; `CancellationError`
    ///   (the write may still complete, see `offload`); `CoroutineError.notInCoroutine` on a
    ///   scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine; resumes on the coroutine's scheduler.
    /// - Complexity: O(length).
    public func save(to url: URL, atomically: Bool = true, encoding: String.Encoding = .utf8) throws {
        let text = self
        try Coroutine.offload { try text.write(to: url, atomically: atomically, encoding: encoding) }
    }
}
