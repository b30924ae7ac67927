import Foundation

extension FileManager {
    /// A view of this file manager whose operations suspend the calling coroutine instead of
    /// blocking its scheduler thread; each runs the Foundation operation of the same name on the
    /// blocking pool.
    ///
    /// ```swift
    /// let files = FileManager.default.suspending
    /// try files.createDirectory(at: dir, withIntermediateDirectories: true)
    /// for url in try files.contentsOfDirectory(at: dir) { … }
    /// ```
    ///
    /// - Complexity: O(1).
    public var suspending: SuspendingFileManager { SuspendingFileManager(manager: self) }
}

/// The operations of a `FileManager`, each run on the blocking pool while the calling coroutine
/// is suspended (see ``Coroutine/offload(to:_:)``).
///
/// Every method has the name and parameters of its `FileManager` counterpart and throws the same
/// Foundation errors (`CocoaError.fileNoSuchFile`, `.fileWriteFileExists`, …). Each also throws
/// `CancellationError` if the coroutine is cancelled while it waits — the operation itself still
/// runs to its end — and `CoroutineError.notInCoroutine` on a scheduler thread outside a
/// coroutine. On a plain thread outside any coroutine the operations run inline.
///
/// ## Threading
/// Obtain it with `FileManager.default.suspending`. Use `FileManager.default` (thread-safe) rather
/// than a file manager with a delegate: the operations run on pool threads.
public struct SuspendingFileManager: @unchecked Sendable {
    // FileManager is thread-safe for the operations below (Foundation documents
    // `FileManager.default` as safe to use from several threads).
    fileprivate let manager: FileManager

    /// Creates a directory: `FileManager.createDirectory(at:withIntermediateDirectories:attributes:)`.
    /// - Parameters:
    ///   - url: The directory to create.
    ///   - withIntermediateDirectories: Create missing parents too; if false, a missing parent
    ///     or an existing directory is an error.
    ///   - attributes: File attributes for the new directories, or nil.
    /// - Throws: Foundation's `CocoaError`; `CancellationError`; `notInCoroutine` (see the type).
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(path components) file-system calls.
    public func createDirectory(at url: URL, withIntermediateDirectories: Bool = false,
                                attributes: [FileAttributeKey: any Sendable]? = nil) throws {
        let m = manager
        try Coroutine.offload {
            try m.createDirectory(at: url, withIntermediateDirectories: withIntermediateDirectories,
                                  attributes: attributes)
        }
    }

    /// Copies a file or directory tree: `FileManager.copyItem(at:to:)`.
    /// - Parameters:
    ///   - source: The item to copy.
    ///   - destination: Where the copy goes; must not exist.
    /// - Throws: `CocoaError.fileNoSuchFile` for a missing source, `.fileWriteFileExists` when
    ///   the destination exists, …
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(bytes copied).
    public func copyItem(at source: URL, to destination: URL) throws {
        let m = manager
        try Coroutine.offload { try m.copyItem(at: source, to: destination) }
    }

    /// Moves or renames an item: `FileManager.moveItem(at:to:)`.
    /// - Parameters:
    ///   - source: The item to move.
    ///   - destination: Its new location; must not exist.
    /// - Throws: Foundation's `CocoaError`; `CancellationError`; `notInCoroutine` (see the type).
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(1) on one file system; O(bytes) across file systems.
    public func moveItem(at source: URL, to destination: URL) throws {
        let m = manager
        try Coroutine.offload { try m.moveItem(at: source, to: destination) }
    }

    /// Removes a file or a directory tree: `FileManager.removeItem(at:)`.
    /// - Parameter url: The item to remove.
    /// - Throws: `CocoaError.fileNoSuchFile` when nothing is there, …
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(items removed).
    public func removeItem(at url: URL) throws {
        let m = manager
        try Coroutine.offload { try m.removeItem(at: url) }
    }

    /// The items of a directory:
    /// `FileManager.contentsOfDirectory(at:includingPropertiesForKeys:options:)`.
    /// - Parameters:
    ///   - url: The directory.
    ///   - keys: Resource values to prefetch, or nil.
    ///   - options: Enumeration options (`.skipsHiddenFiles`, …).
    /// - Returns: The items' URLs, in no particular order.
    /// - Throws: Foundation's `CocoaError`; `CancellationError`; `notInCoroutine` (see the type).
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(items).
    public func contentsOfDirectory(at url: URL, includingPropertiesForKeys keys: [URLResourceKey]? = nil,
                                    options: FileManager.DirectoryEnumerationOptions = []) throws -> [URL] {
        let m = manager
        return try Coroutine.offload {
            try m.contentsOfDirectory(at: url, includingPropertiesForKeys: keys, options: options)
        }
    }

    /// The attributes of an item: `FileManager.attributesOfItem(atPath:)`.
    ///
    /// - Parameter path: The item's path.
    /// - Throws: Foundation's `CocoaError`; `CancellationError`; `notInCoroutine` (see the type).
    /// - Returns: The attributes; values are Foundation's (`NSNumber`, `Date`, `String`, …),
    ///   e.g. `attributes[.size] as? Int`.
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(1) file-system calls.
    public func attributesOfItem(atPath path: String) throws -> [FileAttributeKey: Any] {
        let m = manager
        return try Coroutine.offload { UncheckedSendable(try m.attributesOfItem(atPath: path)) }.value
    }

    /// Whether an item exists at a path: `FileManager.fileExists(atPath:)`.
    /// - Parameter path: The path to check.
    /// - Returns: true if something is there (a broken symbolic link counts as missing).
    /// - Throws: Only `CancellationError` or `CoroutineError.notInCoroutine`.
    /// - Suspends: yes, inside a coroutine; resumes on its scheduler.
    /// - Complexity: O(1) file-system calls.
    public func fileExists(atPath path: String) throws -> Bool {
        let m = manager
        return try Coroutine.offload { m.fileExists(atPath: path) }
    }
}

/// Carries a value that is not `Sendable` (a Foundation object graph built on a pool thread and
/// never touched there again) back to the coroutine.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
