import Testing
import Foundation
import CoroutinesFoundation

@Suite("JSON and property lists off the scheduler thread")
struct CodingTests {
    struct Item: Codable, Equatable, Sendable {
        var id: Int
        var name: String
        var tags: [String]
        var ratio: Double
    }

    static let items = (0..<20_000).map { Item(id: $0, name: "item \($0)", tags: ["a", "\($0 % 7)"], ratio: Double($0) / 8) }

    @Test("Codable JSON round-trips a large array")
    func codableJSON() async throws {
        let decoded = try await Coroutine.run {
            let data = try JSONEncoder().encodeSuspending(Self.items)
            return try JSONDecoder().decodeSuspending([Item].self, from: data)
        }
        #expect(decoded == Self.items)
    }

    @Test("JSONSerialization round-trips an object graph")
    func serialization() async throws {
        let (name, count, bytes) = try await Coroutine.run {
            let data = Data(#"{"name":"coroutines","values":[1,2,3],"nested":{"ok":true}}"#.utf8)
            let object = try JSONSerialization.jsonObjectSuspending(with: data)
            let dictionary = object as? [String: Any]
            let again = try JSONSerialization.dataSuspending(withJSONObject: object, options: [.sortedKeys])
            return (dictionary?["name"] as? String, (dictionary?["values"] as? [Any])?.count, again.count)
        }
        #expect(name == "coroutines")
        #expect(count == 3)
        #expect(bytes > 0)
    }

    @Test("malformed JSON throws the decoder's error")
    func malformed() async throws {
        let thrown = try await Coroutine.run {
            do { _ = try JSONDecoder().decodeSuspending([Item].self, from: Data("[{".utf8)); return false }
            catch is DecodingError { return true }
        }
        #expect(thrown)
    }

    @Test("property lists round-trip in XML and binary form")
    func propertyLists() async throws {
        let sample = Array(Self.items.prefix(1_000))
        let (xml, binary) = try await Coroutine.run {
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .xml
            let xmlData = try encoder.encodeSuspending(sample)
            encoder.outputFormat = .binary
            let binaryData = try encoder.encodeSuspending(sample)
            return (try PropertyListDecoder().decodeSuspending([Item].self, from: xmlData),
                    try PropertyListDecoder().decodeSuspending([Item].self, from: binaryData))
        }
        #expect(xml == sample)
        #expect(binary == sample)
    }
}
