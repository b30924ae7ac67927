import Foundation

extension PropertyListEncoder {
    /// Encodes a value as a property list on the blocking pool; the suspending counterpart of
    /// `encode(_:)`.
    ///
    /// ```swift
    /// let encoder = PropertyListEncoder()
    /// encoder.outputFormat = .binary
    /// let data = try encoder.encodeSuspending(settings)
    /// ```
    ///
    /// The encoder's settings are read on the pool thread: do not change them meanwhile.
    ///
    /// - Parameter value: The value to encode.
    /// - Returns: The property-list bytes, in the encoder's `outputFormat`.
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

extension PropertyListDecoder {
    /// Decodes a value from a property list (XML or binary) on the blocking pool; the suspending
    /// counterpart of `decode(_:from:)`.
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: The property-list bytes.
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
