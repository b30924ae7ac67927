import Foundation

extension Data {
    /// Reads a file's contents on the blocking pool; the suspending counterpart of
    /// `Data(contentsOf:options:)`.
    ///
    /// ```swift
    /// let bytes = try Data.read(contentsOf: url)
    /// ```
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - options: Foundation's reading options.
    /// - Returns: The file's bytes.
    /// - Throws: The Foundation error of `Data(contentsOf:)` (`CocoaError.fileReadNoSuchFile` for a
    ///   missing file, …); `CancellationError`; `CoroutineError.notInCoroutine` on a scheduler
    ///   thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine (via ``Coroutine/offload(to:_:)``); resumes on
    ///   the coroutine's scheduler. On a plain thread it reads inline.
    /// - Complexity: O(file size).
    /// - Threading: callable from any coroutine; see `offload` for cancellation.
    public static func read(contentsOf url: URL, options: Data.ReadingOptions = []) throws -> Data {
        try Coroutine.offload { try Data(contentsOf: url, options: options) }
    }

    /// Writes these bytes to a file on the blocking pool; the suspending counterpart of
    /// `write(to:options:)`.
    ///
    /// ```swift
    /// try payload.save(to: url, options: .atomic)
    /// ```
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - options: Foundation's writing options (`.atomic`, `.withoutOverwriting`, …).
    /// - Throws: The Foundation error of `write(to:options:)`; `CancellationError` (the write may
    ///   still complete, see `offload`); `CoroutineError.notInCoroutine` on a scheduler thread
    ///   outside a coroutine.
    /// - Suspends: yes, inside a coroutine; resumes on the coroutine's scheduler.
    /// - Complexity: O(count).
    public func save(to url: URL, options: Data.WritingOptions = []) throws {
        let data = self
        try Coroutine.offload { try data.write(to: url, options: options) }
    }
}
