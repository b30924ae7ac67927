import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One event of an XML document, as `XMLParser.events(stackSize:)` yields them.
public enum XMLEvent: Sendable, Hashable {
    /// The parser began the document.
    case startDocument
    /// The parser reached the end of the document.
    case endDocument
    /// An element's start tag. With `shouldProcessNamespaces`, `namespaceURI` and
    /// `qualifiedName` are filled in.
    case startElement(name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String])
    /// An element's end tag.
    case endElement(name: String, namespaceURI: String?, qualifiedName: String?)
    /// Character data. The parser may split one text node into several events.
    case characters(String)
    /// Whitespace the document's grammar says can be ignored.
    case ignorableWhitespace(String)
    /// A CDATA section's bytes.
    case cdata(Data)
    /// A comment's text.
    case comment(String)
    /// A processing instruction.
    case processingInstruction(target: String, data: String?)
}

extension XMLParser {
    /// The parser's events as a `Generator`: each event is yielded from inside the
    /// parser's delegate callback, so the document is parsed lazily, one event per `next()`.
    ///
    /// ```swift
    /// for event in XMLParser(data: xml).events() {
    ///     if case .startElement(let name, _, _, _) = event { print(name) }
    /// }
    /// ```
    ///
    /// This is the stackful capability that `async` cannot offer: `XMLParser.parse()` is a
    /// synchronous call that drives its delegate, and the generator suspends it in the middle of a
    /// callback. The generator becomes the parser's delegate at its first `next()`; configure the
    /// parser (`shouldProcessNamespaces`, …) before that, and do not call `parse()` yourself.
    ///
    /// ## Ending
    /// After `.endDocument` the sequence ends. For a malformed document the first error the
    /// parser reports (`XMLParser.errorDomain`) is kept in the generator's `error` when the
    /// sequence ends; the parser may stop at once or, as libxml2 does for some faults, recover
    /// and report a few more events first. Cancelling the generator, or
    /// releasing it before the end, stops the parser cleanly: the pending callback's `yield`
    /// throws, the parser is told to `abortParsing()`, `parse()` returns, and the parser, its
    /// delegate and the generator's stack are released; the generator's `error` is then
    /// `CancellationError`.
    ///
    /// ## Threading
    /// Like every `Generator`, the result is confined to the thread of its first
    /// `next()`; the parser must not be used elsewhere meanwhile.
    ///
    /// - Parameter stackSize: Bytes of stack for the parser and its callbacks (libxml2 runs on
    ///   it); 1 MiB by default.
    /// - Returns: A generator of the document's events.
    /// - Suspends: no. Each `next()` runs the parser on the generator's stack until its next
    ///   event, on the calling thread.
    /// - Complexity: O(1) to create; O(document size) over the whole iteration.
    public func events(stackSize: Int? = nil) -> Generator<XMLEvent> {
        Generator<XMLEvent>(stackSize: stackSize ?? 1 << 20) { [self] yield in
            let delegate = XMLEventDelegate(yield: yield)
            self.delegate = delegate
            defer { self.delegate = nil }
            let finished = parse()
            if let stop = delegate.stop { throw stop }
            // corelibs' parse() can return true after reporting a fatal error to the delegate.
            if let failure = delegate.failure ?? (finished ? nil : parserError) { throw failure }
            if !finished { throw CocoaError(.coderReadCorrupt) }
        }
    }
}

/// Turns delegate callbacks into yields. Lives on the generator's stack for one `parse()`.
private final class XMLEventDelegate: NSObject, XMLParserDelegate {
    private let yield: Yield<XMLEvent>
    /// What stopped the parse from our side (the generator was cancelled or released).
    private(set) var stop: (any Error)?
    /// The first parse error the parser reported.
    private(set) var failure: (any Error)?

    init(yield: Yield<XMLEvent>) {
        self.yield = yield
    }

    private func emit(_ event: XMLEvent, _ parser: XMLParser) {
        guard stop == nil else { return }
        do {
            try yield(event)
        } catch {
            stop = error
            parser.abortParsing()
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        if failure == nil { failure = parseError }
    }

    func parserDidStartDocument(_ parser: XMLParser) { emit(.startDocument, parser) }
    func parserDidEndDocument(_ parser: XMLParser) { emit(.endDocument, parser) }

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
        emit(.startElement(name: elementName, namespaceURI: namespaceURI, qualifiedName: qName,
                           attributes: attributeDict), parser)
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?) {
        emit(.endElement(name: elementName, namespaceURI: namespaceURI, qualifiedName: qName), parser)
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { emit(.characters(string), parser) }

    func parser(_ parser: XMLParser, foundIgnorableWhitespace whitespaceString: String) {
        emit(.ignorableWhitespace(whitespaceString), parser)
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) { emit(.cdata(CDATABlock), parser) }
    func parser(_ parser: XMLParser, foundComment comment: String) { emit(.comment(comment), parser) }

    func parser(_ parser: XMLParser, foundProcessingInstructionWithTarget target: String, data: String?) {
        emit(.processingInstruction(target: target, data: data), parser)
    }
}
