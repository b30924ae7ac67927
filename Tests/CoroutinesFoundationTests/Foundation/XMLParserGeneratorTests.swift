import Testing
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import CoroutinesFoundation

@Suite("XMLParser events as a Generator")
struct XMLParserGeneratorTests {
    static let nested = Data("""
        <?xml version="1.0" encoding="UTF-8"?>
        <library name="main"><shelf id="1"><book lang="en">Dune</book><book lang="fr"/></shelf><!--end--><note><![CDATA[a<b]]></note></library>
        """.utf8)

    static func big(_ count: Int) -> Data {
        var xml = "<items>"
        for i in 0..<count { xml += "<item n=\"\(i)\">value \(i)</item>" }
        return Data((xml + "</items>").utf8)
    }

    /// The events without the parts a Foundation implementation may fill in differently.
    static func normalized(_ events: [XMLEvent]) -> [XMLEvent] {
        var out: [XMLEvent] = []
        for event in events {
            switch event {
            case .startElement(let name, _, _, let attributes):
                out.append(.startElement(name: name, namespaceURI: nil, qualifiedName: nil, attributes: attributes))
            case .endElement(let name, _, _):
                out.append(.endElement(name: name, namespaceURI: nil, qualifiedName: nil))
            case .characters(let text):
                // A parser may split one text node in several callbacks: join them.
                if case .characters(let previous)? = out.last { out[out.count - 1] = .characters(previous + text) }
                else { out.append(event) }
            default:
                out.append(event)
            }
        }
        return out
    }

    @Test("a nested document yields the expected event sequence, from inside a coroutine")
    func nestedDocument() async throws {
        let events = try await Coroutine.run { () -> [XMLEvent] in
            let generator = XMLParser(data: Self.nested).events()
            return Array(generator)
        }
        func start(_ name: String, _ attributes: [String: String] = [:]) -> XMLEvent {
            .startElement(name: name, namespaceURI: nil, qualifiedName: nil, attributes: attributes)
        }
        func end(_ name: String) -> XMLEvent { .endElement(name: name, namespaceURI: nil, qualifiedName: nil) }
        let expected: [XMLEvent] = [
            .startDocument,
            start("library", ["name": "main"]),
            start("shelf", ["id": "1"]),
            start("book", ["lang": "en"]), .characters("Dune"), end("book"),
            start("book", ["lang": "fr"]), end("book"),
            end("shelf"),
            .comment("end"),
            start("note"), .cdata(Data("a<b".utf8)), end("note"),
            end("library"),
            .endDocument,
        ]
        #expect(Self.normalized(events) == expected)
    }

    @Test("events are produced lazily: the parser stops between next() calls")
    func lazy() {
        let generator = XMLParser(data: Self.big(1_000)).events()
        var seen = 0
        for event in generator {
            if case .startElement(let name, _, _, let attributes) = event, name == "item" {
                seen += 1
                if attributes["n"] == "4" { break }
            }
        }
        #expect(seen == 5)
        // The body is still suspended mid-document; cancel() unwinds it.
        generator.cancel()
        #expect(generator.next() == nil)
        #expect(generator.error is CancellationError)
    }

    @Test("releasing the generator early aborts the parse and leaks neither parser nor generator")
    func releaseEarly() {
        weak var weakParser: XMLParser?
        weak var weakGenerator: Generator<XMLEvent>?
        var first: [XMLEvent] = []
        do {
            let parser = XMLParser(data: Self.big(10_000))
            weakParser = parser
            let generator = parser.events()
            weakGenerator = generator
            for _ in 0..<3 { if let e = generator.next() { first.append(e) } }
        }
        #expect(first.count == 3)
        #expect(weakGenerator == nil)
        #expect(weakParser == nil)
    }

    @Test("a malformed document ends the sequence and keeps the parser's error")
    func malformed() {
        let generator = XMLParser(data: Data("<a><b></a>".utf8)).events()
        let events = Array(generator)
        #expect(events.first == .startDocument)
        #expect(generator.error != nil)
        #expect((generator.error as? NSError)?.domain == XMLParser.errorDomain)
    }
}
