import Testing
import Foundation
import CoroutinesFoundation

@Suite("Files: Data, String and FileManager")
struct FileTests {
    @Test("text and binary files round-trip, including 100 MB")
    func roundTrips() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let text = "héllo, coroutines\nsecond line ✓\n"
        let small = Data([0, 1, 2, 255, 254, 0, 10, 13])
        // All the heavy work happens on the coroutine's scheduler thread and the blocking pool,
        // never on a Swift-concurrency thread (other suites need those to make progress).
        let (readText, readSmall, bigCount, bigEqual) = try await Coroutine.run {
            // 100 MB from a pseudo-random block whose length (1 MiB + 7) is no power of two, so a
            // lost or shifted chunk would not line up with the pattern.
            var block = [UInt8](repeating: 0, count: (1 << 20) + 7)
            var x: UInt64 = 0x9E37_79B9_7F4A_7C15
            for i in block.indices {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                block[i] = UInt8(truncatingIfNeeded: x)
            }
            var big = Data(capacity: 100 << 20)
            while big.count < 100 << 20 { big.append(contentsOf: block.prefix((100 << 20) - big.count)) }

            try text.save(to: dir.file("a.txt"))
            try small.save(to: dir.file("b.bin"))
            try big.save(to: dir.file("big.bin"), options: .atomic)
            let readBig = try Data.read(contentsOf: dir.file("big.bin"))
            return (try String.read(contentsOf: dir.file("a.txt")),
                    try Data.read(contentsOf: dir.file("b.bin")),
                    readBig.count, readBig == big)
        }
        #expect(readText == text)
        #expect(readSmall == small)
        #expect(bigCount == 100 << 20)
        #expect(bigEqual)
    }

    @Test("reading a missing file throws Foundation's error")
    func missingFile() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (dataError, textError) = try await Coroutine.run {
            func failure(_ body: () throws -> Void) -> CocoaError? {
                do { try body(); return nil } catch let e as CocoaError { return e } catch { return nil }
            }
            return (failure { _ = try Data.read(contentsOf: dir.file("nope")) },
                    failure { _ = try String.read(contentsOf: dir.file("nope")) })
        }
        #expect(dataError?.code == .fileReadNoSuchFile)
        #expect(textError?.code == .fileReadNoSuchFile)
    }

    @Test("FileManager: create, list, attributes, exists, copy, move and remove")
    func fileManagerOperations() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let report = try await Coroutine.run {
            let files = FileManager.default.suspending
            let nested = dir.url.appendingPathComponent("x/y", isDirectory: true)
            try files.createDirectory(at: nested, withIntermediateDirectories: true)
            let original = nested.appendingPathComponent("one.txt")
            try "12345".save(to: original)
            let copy = nested.appendingPathComponent("two.txt")
            try files.copyItem(at: original, to: copy)
            let moved = dir.file("three.txt")
            try files.moveItem(at: copy, to: moved)
            let listing = try files.contentsOfDirectory(at: nested).map(\.lastPathComponent).sorted()
            let size = (try files.attributesOfItem(atPath: moved.path)[.size] as? NSNumber)?.intValue
            let movedExists = try files.fileExists(atPath: moved.path)
            let copyExists = try files.fileExists(atPath: copy.path)
            try files.removeItem(at: dir.url.appendingPathComponent("x"))
            let removedExists = try files.fileExists(atPath: nested.path)
            return (listing, size, movedExists, copyExists, removedExists)
        }
        #expect(report.0 == ["one.txt"])
        #expect(report.1 == 5)
        #expect(report.2)
        #expect(!report.3)
        #expect(!report.4)
    }

    @Test("FileManager errors are Foundation's, thrown: missing source, existing destination")
    func fileManagerErrors() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let codes = try await Coroutine.run {
            let files = FileManager.default.suspending
            func code(_ body: () throws -> Void) -> CocoaError.Code? {
                do { try body(); return nil } catch let e as CocoaError { return e.code } catch { return nil }
            }
            try "a".save(to: dir.file("a"))
            try "b".save(to: dir.file("b"))
            return [
                code { try files.removeItem(at: dir.file("missing")) },
                code { try files.copyItem(at: dir.file("missing"), to: dir.file("c")) },
                code { try files.moveItem(at: dir.file("missing"), to: dir.file("c")) },
                code { _ = try files.attributesOfItem(atPath: dir.file("missing").path) },
                code { _ = try files.contentsOfDirectory(at: dir.file("missing")) },
                code { try files.copyItem(at: dir.file("a"), to: dir.file("b")) },
            ]
        }
        // Foundation reports a missing item as fileNoSuchFile (remove, move) or fileReadNoSuchFile
        // (copy, attributes, listing), as its blocking calls do.
        let missing: Set<CocoaError.Code> = [.fileNoSuchFile, .fileReadNoSuchFile]
        #expect(codes.count == 6)
        for (i, c) in codes.prefix(5).enumerated() {
            #expect(c.map(missing.contains) == true, "operation \(i) threw \(String(describing: c))")
        }
        #expect(codes.last == .fileWriteFileExists)
    }
}
