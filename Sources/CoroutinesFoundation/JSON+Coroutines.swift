import Foundation

extension JSONEncoder {
    /// Encodes a value as JSON on the blocking pool, keeping a large encoding off the scheduler
    /// thread; the suspending counterpart of `encode(_:)`.
    ///
    /// ```swift
    /// let data = try JSONEncoder().encodeSuspending(report)
    /// ```
    ///
    /// The encoder's settings are read on the pool thread: do not change them while the call is
    /// in progress.
    ///
    /// - Parameter value: The value to encode.
    /// - Returns: The JSON bytes.
    /// - Throws: `EncodingError`; `CancellationError`; `CoroutineError.notInCoroutine` on a
    ///   scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine (via ``Coroutine/offload(to:_:)``); resumes on
    ///   the coroutine's scheduler. On a plain thread it encodes inline.
    /// - Complexity: O(size of the encoding).
    public func encodeSuspending<Value: Encodable & Sendable>(_ value: Value) throws -> Data {
        let encoder = UncheckedSendable(self)
        return try Coroutine.offload { try encoder.value.encode(value) }
    }
}

extension JSONDecoder {
    /// Decodes a value from JSON on the blocking pool; the suspending counterpart of
    /// `decode(_:from:)`.
    ///
    /// ```swift
    /// let report = try JSONDecoder().decodeSuspending(Report.self, from: data)
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: The JSON bytes.
    /// - Returns: The decoded value.
    /// - Throws: `DecodingError`; `CancellationError`; `CoroutineError.notInCoroutine` on a
    ///   scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine; resumes on the coroutine's scheduler.
    /// - Complexity: O(data.count).
    public func decodeSuspending<Value: Decodable & Sendable>(_ type: Value.Type, from data: Data) throws -> Value {
        let decoder = UncheckedSendable(self)
        return try Coroutine.offload { try decoder.value.decode(type, from: data) }
    }
}

extension JSONSerialization {
    /// Parses JSON into Foundation objects on the blocking pool; the suspending counterpart of
    /// `jsonObject(with:options:)`.
    ///
    /// ```swift
    /// let object = try JSONSerialization.jsonObjectSuspending(with: data) as? [String: Any]
    /// ```
    ///
    /// - Parameters:
    ///   - data: The JSON bytes.
    ///   - options: Foundation's reading options.
    /// - Returns: The object graph (`[String: Any]`, `[Any]`, `String`, `NSNumber`, `NSNull`).
    /// - Throws: The Foundation parse error; `CancellationError`; `CoroutineError.notInCoroutine`
    ///   on a scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine; resumes on the coroutine's scheduler.
    /// - Complexity: O(data.count).
    public static func jsonObjectSuspending(with data: Data, options: ReadingOptions = []) throws -> Any {
        try Coroutine.offload { UncheckedSendable(try jsonObject(with: data, options: options)) }.value
    }

    /// Serialises Foundation objects as JSON on the blocking pool; the suspending counterpart of
    /// `data(withJSONObject:options:)`.
    ///
    /// - Parameters:
    ///   - object: A valid JSON object graph (check with `isValidJSONObject(_:)`: an invalid one
    ///     raises an Objective-C exception on Darwin and traps on Linux, as in Foundation). The
    ///     caller must not mutate it until the call returns.
    ///   - options: Foundation's writing options.
    /// - Returns: The JSON bytes.
    /// - Throws: The Foundation error; `CancellationError`; `CoroutineError.notInCoroutine` on a
    ///   scheduler thread outside a coroutine.
    /// - Suspends: yes, inside a coroutine; resumes on the coroutine's scheduler.
    /// - Complexity: O(size of the graph).
    public static func dataSuspending(withJSONObject object: Any, options: WritingOptions = []) throws -> Data {
        let graph = UncheckedSendable(object)
        return try Coroutine.offload { try data(withJSONObject: graph.value, options: options) }
    }
}
