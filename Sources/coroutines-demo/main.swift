// Scenarios that show each part of the library at work, on real coroutines; the rules they
// illustrate are stated in the DocC articles of the Coroutines and CoroutinesFoundation catalogs
// (scenario 1 is the launch-order example of <doc:CoroutineLifecycle>, scenario 6 the counter of
// <doc:Actors>). Delays are scaled down so the demo finishes in a few seconds.
import Coroutines
import CoroutinesFoundation
import Dispatch
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import QueuePool

func heading(_ title: String) {
    print("\n=== \(title) ===")
}

// MARK: 1. Launch order on the main scheduler

heading("1. launch order (main scheduler + two other schedulers)")
let four = CoroutineScheduler(name: "scheduler-4")
let five = CoroutineScheduler(name: "scheduler-5")
try Coroutine.runBlocking {
    Coroutine.launch { print("1") }
    Coroutine.launch {
        try Coroutine.delay(.milliseconds(400))
        print("2")
    }
    Coroutine.launch {
        try Coroutine.delay(.milliseconds(200))
        print("2-delay-1")
    }
    Coroutine.launch { print("3") }
    Coroutine.launch(on: four) { print("4") }
    Coroutine.launch(on: five) { print("5") }
    print("0")
}
four.stop()
five.stop()

// MARK: 2. await a promise fulfilled later

heading("2. await a promise fulfilled 300 ms later (3 s in the original)")
try Coroutine.runBlocking {
    // Fulfilled by a block on DispatchQueue.main: the main scheduler runs main-queue blocks
    // while it drives the main thread.
    let promise = Promise<String> { promise in
        DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(300)) {
            promise.fulfill("co finish")
        }
    }
    Coroutine.launch {
        print("co start")
        let text = try promise.await()       // suspends the coroutine, not the thread
        print(text)
    }
    print("main")
}

// MARK: 3. The Go channel example

heading("3. Go channel example: a rendezvous channel between two coroutines")
try Coroutine.runBlocking {
    let channel = Channel<String>()          // unbuffered, as Go's make(chan string)
    Coroutine.launch(name: "producer") {
        try Coroutine.delay(.milliseconds(200))   // 1 s in the original
        print("data arrived")
        try channel.send(" has arrived!")
    }
    print("waiting: blocked")
    let text = try channel.receive()         // suspends until the producer sends
    print("test data" + text)
}

heading("3b. concurrent prime sieve: a filter coroutine per prime, the first 25 primes")
try Coroutine.runBlocking {
    // Go's classic sieve: a generator feeds 2, 3, 4, …; each prime gets a filter coroutine
    // that passes on the numbers it does not divide.
    var source = Coroutine.produce { (out: Channel<Int>) in
        var n = 2
        while true {
            try out.send(n)
            n += 1
        }
    }
    var primes: [Int] = []
    for _ in 0..<25 {
        let prime = try source.receive()
        primes.append(prime)
        let input = source
        source = Coroutine.produce { out in
            defer { input.close() }          // when this filter ends, the one before it ends too
            for n in input where n % prime != 0 { try out.send(n) }
        }
    }
    print(primes.map(String.init).joined(separator: " "))
    source.close()   // the last filter's send throws ChannelError.closed: the chain unwinds
}

// MARK: 4. ucontext-style ping-pong

heading("4. ping-pong: main → coroutine → main")
try Coroutine.runBlocking {
    let peer = Coroutine.launch(name: "peer") {
        for step in [2, 4, 6] {
            print("coroutine: step \(step)")
            try Coroutine.yield()            // switch back to main
        }
    }
    for step in [1, 3, 5] {
        print("main: step \(step)")
        try Coroutine.yield()                // switch to the coroutine
    }
    try peer.join()
    print("main: done")
}

// MARK: 5. Generators

heading("5. generator yielding 0, 1, 2, … consumed 10 times")
// The body runs on its own stack; each next() switches to it and back on this thread.
let naturals = Generator<Int> { yield in
    var i = 0
    while true {
        try yield(i)
        i += 1
    }
}
for _ in 0..<10 {
    print(naturals.next()!, terminator: " ")
}
print()
naturals.cancel()      // unwinds the endless body (its yield throws CancellationError)

heading("5. a generator of generators (chained)")
// Each row is itself a generator; the outer one yields them lazily.
let rows = Generator<Generator<Int>> { yield in
    for row in 1...3 {
        try yield(Generator<Int> { cell in
            for column in 1...4 { try cell(row * column) }
        })
    }
}
for row in rows {
    print(Array(row).map { String($0) }.joined(separator: " "))
}
// A chain: squares of the naturals, filtered — each stage pulls from the one before.
let numbers = Generator<Int> { yield in for n in 1... { try yield(n) } }
let squares = Generator<Int> { yield in while let n = numbers.next() { try yield(n * n) } }
let oddSquares = Generator<Int> { yield in while let s = squares.next() { if s % 2 == 1 { try yield(s) } } }
print("odd squares:", Array(oddSquares.prefix(5)))

heading("5. a generator walking a recursive tree (yield from inside the recursion)")
indirect enum Tree {
    case leaf
    case node(Tree, String, Tree)

    /// In-order walk: an ordinary recursive function; `yield` suspends the whole recursion.
    func walk(depth: Int, _ yield: Yield<String>) throws {
        guard case .node(let left, let label, let right) = self else { return }
        try left.walk(depth: depth + 1, yield)
        try yield(String(repeating: "  ", count: depth) + label)
        try right.walk(depth: depth + 1, yield)
    }
}
let tree = Tree.node(.node(.node(.leaf, "a", .leaf), "b", .node(.leaf, "c", .leaf)),
                     "d",
                     .node(.leaf, "e", .node(.node(.leaf, "f", .leaf), "g", .leaf)))
let labels = Generator<String> { yield in try tree.walk(depth: 0, yield) }
for line in labels { print(line) }

// MARK: 6. An actor counter

heading("6. actor counter: six +1, one −1, then get")
enum CounterMessage: Sendable { case add(Int), get }
try Coroutine.runBlocking {
    let counter = CoroutineActor<CounterMessage, Int> { mailbox in
        var total = 0                                   // state owned by the actor's coroutine
        for envelope in mailbox {
            switch envelope.message {
            case .add(let n):
                total += n
                envelope.reply(total)
            case .get:
                envelope.reply(total)
            }
        }
    }
    for _ in 0..<6 { counter.send(.add(1)) }            // never blocks; replies ignored
    counter.send(.add(-1))
    print("get → \(try counter.send(.get).await())")   // suspends until the actor replies
    counter.cancel()
}

// MARK: 7. Multi-value await with a tuple

heading("7. multi-value await with a tuple")

/// Reads a file on a coroutine and returns (path, contents, error) as one value.
func loadFile(_ path: String) -> Promise<(String, String?, String?)> {
    Coroutine.async {
        do {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            return (path, text, nil)
        } catch {
            return (path, nil, "\(error.localizedDescription)")
        }
    }
}

let samplePath = NSTemporaryDirectory() + "coroutines-demo-\(getpid()).txt"
try "hello from a file\n".write(toFile: samplePath, atomically: true, encoding: .utf8)
try Coroutine.runBlocking {
    let (path, data, error) = try loadFile(samplePath).await()
    print("path: \(path.hasSuffix(".txt") ? "(temporary file)" : path)")
    print("data: \(data.map { $0.trimmingCharacters(in: .newlines) } ?? "nil")")
    print("error: \(error ?? "nil")")
    let (_, missing, missingError) = try loadFile("/nonexistent/file").await()
    print("missing file → data: \(missing ?? "nil"), error: \(missingError == nil ? "nil" : "present")")
}
try? FileManager.default.removeItem(atPath: samplePath)

// MARK: 8. DispatchQueuePool

heading("8. DispatchQueuePool.default(for: .utility)")
let pool = DispatchQueuePool.default(for: .utility)
print("queues: \(pool.queueCount) (active processors, clamped to 1…32)")
for queue in pool.queues {
    print("label: \(queue.label)")
}
print("next() × \(pool.queueCount * 2): " + (0..<(pool.queueCount * 2)).map { _ in pool.next().label.split(separator: ".").last.map(String.init) ?? "?" }.joined(separator: " "))

// MARK: 9. CoroutinesFoundation

heading("9. CoroutinesFoundation: files, JSON and XML")

/// A record for the JSON round trip.
struct Planet: Codable, Sendable, Equatable {
    var name: String
    var moons: Int
}

try Coroutine.runBlocking {
    // File and JSON work runs on the blocking pool (Coroutine.offload): this coroutine is
    // suspended meanwhile and its scheduler thread stays free for other coroutines.
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("coroutines-demo-\(getpid())", isDirectory: true)
    let files = FileManager.default.suspending
    try files.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    let file = directory.appendingPathComponent("planets.json")
    let planets = [Planet(name: "Earth", moons: 1), Planet(name: "Mars", moons: 2), Planet(name: "Jupiter", moons: 95)]
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    try encoder.encodeSuspending(planets).save(to: file, options: .atomic)
    let size = (try files.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.intValue ?? 0
    print("wrote \(file.lastPathComponent): \(size) bytes")
    let decoded = try JSONDecoder().decodeSuspending([Planet].self, from: try Data.read(contentsOf: file))
    print("read back: " + decoded.map { "\($0.name) (\($0.moons))" }.joined(separator: ", "))
    print("round trip equal: \(decoded == planets)")

    let xml = Data("<solar><planet name=\"Earth\"><moon>Moon</moon></planet><planet name=\"Mars\"><moon>Phobos</moon><moon>Deimos</moon></planet></solar>".utf8)
    var depth = 0
    for event in XMLParser(data: xml).events() {
        switch event {
        case .startElement(let name, _, _, let attributes):
            let detail = attributes["name"].map { " \($0)" } ?? ""
            print(String(repeating: "  ", count: depth) + "<\(name)>\(detail)")
            depth += 1
        case .endElement:
            depth -= 1
        case .characters(let text) where !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty:
            print(String(repeating: "  ", count: depth) + text)
        default:
            break
        }
    }
}

// MARK: 10. echo round trip over loopback

heading("10. echo round trip over loopback")
try Coroutine.runBlocking {
    // A listener on an ephemeral loopback port, a coroutine serving the one connection, and a
    // client coroutine (this one) doing a single round trip.
    let listener = try TCPListener.bind(host: "127.0.0.1", port: 0)
    defer { listener.close() }
    Coroutine.launch(name: "echo-server") {
        let connection = try listener.accept()
        defer { connection.close() }
        let line = try connection.read(upTo: 1024)
        try connection.write(line)
    }
    let client = try TCPSocket.connect(host: "127.0.0.1", port: listener.port)
    defer { client.close() }
    try client.write("hello over loopback\n")
    var echoed: [UInt8] = []
    while echoed.last != UInt8(ascii: "\n") {
        let chunk = try Coroutine.withTimeout(.seconds(5)) { try client.read(upTo: 1024) }
        if chunk.isEmpty { break }
        echoed += chunk
    }
    print("echoed: \(String(decoding: echoed, as: UTF8.self).trimmingCharacters(in: .newlines))")
}

// MARK: 11. A fan-out over the default pool (<doc:PoolsAndStealing>)

heading("11. CPU work fanned out over SchedulerPool.default(for: .default)")

/// About `milliseconds` of CPU work (xorshift steps), returning something the optimiser must
/// compute.
func burn(milliseconds: Int, seed: Int) -> UInt64 {
    var x = UInt64(truncatingIfNeeded: seed) | 1
    let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
    while DispatchTime.now().uptimeNanoseconds < deadline {
        for _ in 0..<1_000 { x ^= x << 13; x ^= x >> 7; x ^= x << 17 }
    }
    return x
}

let defaultPool = SchedulerPool.default(for: .default)
let fanOutStart = DispatchTime.now().uptimeNanoseconds
let ranOn = try Coroutine.runBlocking {
    try Coroutine.async(on: defaultPool) {
        // 40 children of 8 ms each (320 ms of CPU work), launched without `on:`: pool launches,
        // started by whichever scheduler of the pool is free.
        let children = (0..<40).map { i in
            Coroutine.async { () -> String in
                _ = burn(milliseconds: 8, seed: i)
                return CoroutineScheduler.current!.name
            }
        }
        return try children.map { try $0.await() }
    }.await()
}
let fanOutMilliseconds = (DispatchTime.now().uptimeNanoseconds - fanOutStart) / 1_000_000
let schedulersUsed = Set(ranOn)
print("320 ms of CPU work in 40 coroutines took \(fanOutMilliseconds) ms of wall time")
print("schedulers that ran them: \(schedulersUsed.count) of \(defaultPool.schedulers.count) (\(schedulersUsed.sorted().joined(separator: ", ")))")
