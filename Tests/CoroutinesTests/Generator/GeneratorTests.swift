import CCoroutines
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

/// Hands a generator from one coroutine to another.
private final class GeneratorSlot: @unchecked Sendable { var g: Generator<Int>? }

/// A weak reference to a coroutine, shared with the coroutines of a test.
private final class WeakCoroutineRef: @unchecked Sendable { weak var c: Coroutine? }

/// A non-throwing visitor API (like a parser delegate): the callback cannot throw.
private func forEachSynchronously(_ range: Range<Int>, _ body: (Int) -> Void) {
    for i in range { body(i) }
}

/// A tree for the recursive-walk tests.
indirect enum GeneratorTestTree: Sendable {
    case leaf
    case node(GeneratorTestTree, Int, GeneratorTestTree)

    /// A balanced tree holding `range` (in order).
    static func balanced(_ range: Range<Int>) -> GeneratorTestTree {
        guard !range.isEmpty else { return .leaf }
        let mid = range.lowerBound + range.count / 2
        return .node(balanced(range.lowerBound..<mid), mid, balanced(mid + 1..<range.upperBound))
    }

    /// A degenerate tree (a list leaning right) of depth `n`.
    static func spine(_ n: Int) -> GeneratorTestTree {
        var t = GeneratorTestTree.leaf
        for i in (0..<n).reversed() { t = .node(.leaf, i, t) }
        return t
    }

    /// In-order walk that yields from inside the recursion.
    func walk(_ yield: Yield<Int>) throws {
        guard case .node(let l, let v, let r) = self else { return }
        try l.walk(yield)
        try yield(v)
        try r.walk(yield)
    }
}

private struct BodyError: Error, Equatable { let code: Int }

/// Holds a generator weakly so that its own body can reach it (re-entrancy tests).
final class GeneratorHolder<Element> {
    weak var generator: Generator<Element>?
}

/// Counts the live instances of ``CountedElement`` made with it (element ownership tests).
private final class ElementCounter: @unchecked Sendable {
    private let count = Atomic<Int>(0)
    var live: Int { count.load(ordering: .relaxed) }
    func made() { count.wrappingAdd(1, ordering: .relaxed) }
    func freed() { count.wrappingSubtract(1, ordering: .relaxed) }
}

/// An element with reference semantics whose instances are counted.
private final class CountedElement: @unchecked Sendable, CountedValue {
    let counter: ElementCounter
    let n: Int
    init(_ counter: ElementCounter, _ n: Int) {
        self.counter = counter
        self.n = n
        counter.made()
    }
    deinit { counter.freed() }
}

private protocol CountedValue { var n: Int { get } }

/// A large element with references, a string and an optional inside.
private struct LargeElement {
    var head: CountedElement
    var text: String
    var tail: [CountedElement]
    var padding = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var extra: CountedElement?
}

/// Drains a generator in unspecialized generic code (the element moved out through its
/// value witnesses).
@inline(never)
private func drainGenerically<T>(_ g: Generator<T>, upTo limit: Int = .max) -> [T] {
    var out: [T] = []
    while out.count < limit, let x = g.next() { out.append(x) }
    return out
}

/// Generators, as the Generators article states them (<doc:Generators>).
@Suite("Generators")
struct GeneratorTests {
    // MARK: Laziness and stepping

    @Test("nothing runs before the first next()")
    func lazyStart() {
        var log: [String] = []
        let g = Generator<Int> { yield in
            log.append("body started")
            try yield(1)
        }
        #expect(log.isEmpty)
        #expect(g.frame.pointee.stack == nil, "no stack is taken before the first next()")
        #expect(g.next() == 1)
        #expect(log == ["body started"])
    }

    @Test("producer and consumer side effects interleave exactly one step at a time")
    func interleaving() {
        var log: [String] = []
        let g = Generator<Int> { yield in
            for i in 0..<3 {
                log.append("produce \(i)")
                try yield(i)
                log.append("resumed after \(i)")
            }
            log.append("body end")
        }
        while let v = g.next() { log.append("consume \(v)") }
        #expect(log == ["produce 0", "consume 0", "resumed after 0",
                        "produce 1", "consume 1", "resumed after 1",
                        "produce 2", "consume 2", "resumed after 2", "body end"])
    }

    @Test("a generator is a Sequence: for-in, prefix, map")
    func sequence() {
        let naturals = Generator<Int> { yield in
            var i = 0
            while true { try yield(i); i += 1 }
        }
        #expect(Array(naturals.prefix(10)) == Array(0..<10))
        // prefix consumed exactly 10 (the 11th was never asked for): the next is 10.
        #expect(naturals.next() == 10)
        var squares: [Int] = []
        for n in Generator<Int>({ yield in for i in 1...4 { try yield(i * i) } }) { squares.append(n) }
        #expect(squares == [1, 4, 9, 16])
    }

    @Test("yield works from deep recursion (a tree walk)")
    func recursiveWalk() {
        let tree = GeneratorTestTree.balanced(0..<1000)
        let g = Generator<Int> { yield in try tree.walk(yield) }
        #expect(Array(g) == Array(0..<1000))
        // A 2,000-deep spine on a 1 MiB stack: yield from the bottom of the recursion.
        let spine = GeneratorTestTree.spine(2000)
        let deep = Generator<Int>(stackSize: 1024 * 1024) { yield in try spine.walk(yield) }
        #expect(Array(deep) == Array(0..<2000))
    }

    @Test("yield works inside a callback of a synchronous API")
    func yieldInsideCallback() {
        let g = Generator<String> { yield in
            var failure: (any Error)?
            ["a", "b", "c"].forEach { s in
                guard failure == nil else { return }
                do { try yield(s.uppercased()) } catch { failure = error }
            }
            if let failure { throw failure }
        }
        #expect(Array(g) == ["A", "B", "C"])
    }

    // MARK: Exhaustion and errors

    @Test("after the body returns, next() returns nil forever and the body ran once")
    func exhaustionIsIdempotent() {
        var runs = 0
        let g = Generator<Int> { yield in
            runs += 1
            try yield(1)
            try yield(2)
        }
        #expect(g.next() == 1)
        #expect(g.next() == 2)
        #expect(g.next() == nil)
        #expect(g.next() == nil)
        #expect(g.next() == nil)
        #expect(runs == 1)
        #expect(g.error == nil)
        #expect(g.frame.pointee.stack == nil, "the stack went back to the pool when the body returned")
    }

    @Test("an error thrown by the body ends the generator and is kept in error")
    func errorIsKept() {
        let g = Generator<Int> { yield in
            try yield(1)
            throw BodyError(code: 7)
        }
        #expect(g.error == nil)
        #expect(g.next() == 1)
        #expect(g.error == nil, "nothing thrown yet")
        #expect(g.next() == nil)
        #expect(g.error as? BodyError == BodyError(code: 7))
        #expect(g.next() == nil)
        #expect(g.error as? BodyError == BodyError(code: 7))
    }

    @Test("a body that throws before its first yield: next() is nil at once")
    func throwsAtOnce() {
        let g = Generator<Int> { _ in throw BodyError(code: 1) }
        #expect(g.next() == nil)
        #expect(g.error as? BodyError == BodyError(code: 1))
    }

    // MARK: Cancellation and release

    @Test("cancel() of a suspended body: the pending yield throws, defer runs exactly once")
    func cancelUnwinds() {
        var log: [String] = []
        let g = Generator<Int> { yield in
            defer { log.append("defer") }
            var i = 0
            do {
                while true { try yield(i); i += 1 }
            } catch {
                log.append("caught \(type(of: error))")
                throw error
            }
        }
        #expect(g.next() == 0)
        #expect(g.next() == 1)
        g.cancel()
        #expect(log == ["caught CancellationError", "defer"])
        #expect(g.error is CancellationError)
        #expect(g.frame.pointee.stack == nil, "the stack went back to the pool")
        #expect(g.next() == nil)
        g.cancel()
        #expect(log == ["caught CancellationError", "defer"], "a second cancel does nothing")
    }

    @Test("cancel() before the first next(): the body never runs")
    func cancelBeforeStart() {
        var ran = false
        let g = Generator<Int> { yield in ran = true; try yield(1) }
        g.cancel()
        #expect(g.next() == nil)
        #expect(!ran)
        #expect(g.error == nil)
    }

    @Test("cancel() from inside the body: its next yield throws without switching")
    func cancelFromInsideBody() {
        let holder = GeneratorHolder<Int>()
        var log: [String] = []
        let g = Generator<Int> { yield in
            try yield(1)
            holder.generator?.cancel()
            do { try yield(2) } catch { log.append("yield threw \(type(of: error))"); throw error }
        }
        holder.generator = g
        #expect(g.next() == 1)
        #expect(g.next() == nil)
        #expect(log == ["yield threw CancellationError"])
        #expect(g.error is CancellationError)
    }

    @Test("releasing an unfinished generator unwinds its body: defer runs exactly once")
    func releaseUnwinds() {
        var log: [String] = []
        weak var weakGenerator: Generator<Int>?
        do {
            let g = Generator<Int> { yield in
                defer { log.append("defer") }
                var i = 0
                while true { try yield(i); i += 1 }
            }
            weakGenerator = g
            #expect(g.next() == 0)
            #expect(g.next() == 1)
            #expect(log.isEmpty)
        }
        #expect(weakGenerator == nil, "the suspended body holds no strong reference to its generator")
        #expect(log == ["defer"])
    }

    @Test("releasing a generator that never started or already ended runs nothing")
    func releaseIdle() {
        var runs = 0
        do { _ = Generator<Int> { _ in runs += 1 } }
        #expect(runs == 0)
        do {
            let g = Generator<Int> { yield in runs += 1; try yield(1) }
            #expect(Array(g) == [1])
        }
        #expect(runs == 1)
    }

    @Test("a body that swallows the cancellation in a non-throwing callback runs on to its end without switching")
    func swallowingBodyRunsToEnd() {
        var log: [String] = []
        var failedYields = 0
        let g = Generator<Int> { yield in
            forEachSynchronously(0..<100) { i in
                do { try yield(i) } catch { failedYields += 1 }
            }
            log.append("body end")
        }
        #expect(g.next() == 0)
        #expect(g.next() == 1)
        #expect(g.next() == 2)
        g.cancel()
        // The pending yield of 2 and the 97 later ones all threw; the body ended inside cancel().
        #expect(failedYields == 98)
        #expect(log == ["body end"])
        #expect(g.error == nil, "the body swallowed the cancellation and returned normally")
        #expect(g.next() == nil)
    }

    @Test("releasing generators in every state gives every stack back",
          arguments: ["cancelled", "released", "exhausted", "threw"])
    func stacksAreReturned(how: String) {
        var defers = 0
        for _ in 0..<200 {
            let g = Generator<Int>(stackSize: 32 * 1024) { yield in
                defer { defers += 1 }
                try yield(1)
                try yield(2)
                if how == "threw" { throw BodyError(code: 0) }
            }
            #expect(g.next() == 1)
            let stack = g.frame.pointee.stack
            #expect(stack != nil)
            switch how {
            case "cancelled": g.cancel()
            case "exhausted", "threw": while g.next() != nil {}
            default: break
            }
            if how != "released" { #expect(g.frame.pointee.stack == nil) }
        }
        #expect(defers == 200)
    }

    // MARK: Threads and coroutines

    @Test("a generator works on a plain thread that is not a scheduler thread")
    func plainThread() async throws {
        let (values, sameThread, noScheduler) = try await Kit.onPlainThread { () -> ([Int], Bool, Bool) in
            let consumerThread = Kit.threadID()
            var bodyThreads: Set<UInt64> = []
            var schedulerSeen = false
            let g = Generator<Int> { yield in
                for i in 0..<5 {
                    bodyThreads.insert(Kit.threadID())
                    schedulerSeen = schedulerSeen || CoroutineScheduler.current != nil || Coroutine.current != nil
                    try yield(i)
                }
            }
            let values = Array(g)
            return (values, bodyThreads == [consumerThread], !schedulerSeen)
        }
        #expect(values == [0, 1, 2, 3, 4])
        #expect(sameThread, "the body runs on the consumer's thread")
        #expect(noScheduler)
    }

    @Test("outside a coroutine the body sees no coroutine and a suspending call throws notInCoroutine")
    func suspendingOutsideCoroutine() async throws {
        let outcome = try await Kit.onPlainThread { () -> String in
            let g = Generator<String> { yield in
                do {
                    try Coroutine.delay(.milliseconds(1))
                    try yield("delayed")
                } catch let e as CoroutineError {
                    try yield("\(Coroutine.current == nil) \(e == .notInCoroutine)")
                }
            }
            return g.next() ?? "nil"
        }
        #expect(outcome == "true true")
    }

    @Test("inside a coroutine the body runs on its behalf: Coroutine.current is the consumer, delay suspends it")
    func insideCoroutine() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let consumer = Coroutine.current!
            let g = Generator<Int> { yield in
                log.append("body sees consumer: \(Coroutine.current === consumer)")
                // Suspends the consumer coroutine; its scheduler runs the other coroutine meanwhile.
                try Coroutine.delay(.milliseconds(5))
                log.append("body after delay")
                try yield(1)
                try Coroutine.yield()
                log.append("body after Coroutine.yield")
                try yield(2)
            }
            let other = Coroutine.launch {
                log.append("other coroutine ran")
            }
            log.append("consumer got \(g.next().map(String.init) ?? "nil")")
            log.append("consumer got \(g.next().map(String.init) ?? "nil")")
            #expect(g.next() == nil)
            try other.join()
            return log.all
        }
        #expect(log == ["body sees consumer: true", "other coroutine ran", "body after delay",
                        "consumer got 1", "body after Coroutine.yield", "consumer got 2"])
    }

    @Test("two coroutines on one scheduler each suspended inside their own generator's body")
    func twoCoroutinesSuspendedInGenerators() async throws {
        let totals = try await Kit.run { () -> [Int] in
            let results = Kit.Log<Int>()
            let workers = (0..<2).map { w in
                Coroutine.launch {
                    let g = Generator<Int> { yield in
                        for i in 0..<20 {
                            try Coroutine.delay(.microseconds(100 * (w + 1)))
                            try yield(i * (w + 1))
                        }
                    }
                    results.append(g.reduce(0, +))
                }
            }
            for c in workers { try c.join() }
            return results.all.sorted()
        }
        #expect(totals == [190, 380])
    }

    @Test("cancelling the consumer coroutine while the body waits inside delay ends the body with CancellationError")
    func consumerCancelledInsideBody() async throws {
        let outcome = try await Kit.run { () -> String in
            let started = Promise<Void>()
            let seen = Kit.Box("")
            let c = Coroutine.launch {
                let g = Generator<Int> { yield in
                    started.fulfill(())
                    try Coroutine.delay(hangBound)
                    try yield(1)
                }
                let v = g.next()
                seen.value = "\(v.map(String.init) ?? "nil") \(g.error is CancellationError)"
            }
            try started.await()
            c.cancel()
            try c.join()
            return seen.value
        }
        #expect(outcome == "nil true")
    }

    @Test("nested generators inside a coroutine: the inner body suspends the coroutine and resumes on the inner stack")
    func nestedGeneratorsSuspendingInCoroutine() async throws {
        let (values, log) = try await Kit.run { () -> ([Int], [String]) in
            let log = Kit.Log<String>()
            let inner = Generator<Int> { yield in
                for i in 0..<3 {
                    try Coroutine.delay(.milliseconds(1))   // suspends the consumer coroutine
                    try yield(i)
                }
            }
            let outer = Generator<Int> { yield in
                while let v = inner.next() {
                    try Coroutine.yield()                   // suspends it from the outer stack too
                    try yield(v * 10)
                }
            }
            let ticker = Coroutine.launch {
                for _ in 0..<3 { log.append("tick"); try Coroutine.yield() }
            }
            let values = Array(outer)
            try ticker.join()
            return (values, log.all)
        }
        #expect(values == [0, 10, 20])
        #expect(log == ["tick", "tick", "tick"], "the other coroutine ran while the consumer was suspended in the bodies")
    }

    @Test("a generator on a scheduler's loop, outside any coroutine")
    func onSchedulerLoop() async throws {
        try await Kit.withScheduler("generator-loop") { s in
            let values = try await Kit.onSchedulerLoop(s) { () -> [Int] in
                Array(Generator<Int> { yield in for i in 0..<3 { try yield(i) } })
            }
            #expect(values == [0, 1, 2])
        }
    }

    // MARK: Composition

    @Test("chained generators: one yields another's next()")
    func chained() {
        let naturals = Generator<Int> { yield in
            var i = 0
            while true { try yield(i); i += 1 }
        }
        let evens = Generator<Int> { yield in
            while let n = naturals.next(), n < 20 {
                if n % 2 == 0 { try yield(n) }
            }
        }
        let labels = Generator<String> { yield in
            for e in evens { try yield("#\(e)") }
        }
        #expect(Array(labels) == (0..<10).map { "#\($0 * 2)" })
    }

    @Test("a generator of generators")
    func generatorOfGenerators() {
        let outer = Generator<Generator<Int>> { yield in
            for row in 0..<3 {
                try yield(Generator<Int> { inner in
                    for col in 0..<3 { try inner(row * 10 + col) }
                })
            }
        }
        var seen: [[Int]] = []
        for g in outer { seen.append(Array(g)) }
        #expect(seen == [[0, 1, 2], [10, 11, 12], [20, 21, 22]])
    }

    @Test("a generator of generators of generators: each level's yield hands out the next level's generators")
    func threeLevelsOfGenerators() {
        let outer = Generator<Generator<Generator<Int>>> { yieldPlane in
            for plane in 0..<2 {
                try yieldPlane(Generator<Generator<Int>> { yieldRow in
                    for row in 0..<2 {
                        try yieldRow(Generator<Int> { yieldCell in
                            for col in 0..<3 { try yieldCell(plane * 100 + row * 10 + col) }
                        })
                    }
                })
            }
        }
        var seen: [[[Int]]] = []
        for rows in outer { seen.append(rows.map { Array($0) }) }
        #expect(seen == [[[0, 1, 2], [10, 11, 12]], [[100, 101, 102], [110, 111, 112]]])
    }

    /// One generator per subtree: its body walks its children's generators and hands their
    /// elements on with its own yield (a coroutine yield at each node too, if `suspending`).
    private static func subtreeGenerator(_ tree: GeneratorTestTree, suspending: Bool) -> Generator<Int> {
        Generator<Int> { yield in
            guard case .node(let l, let v, let r) = tree else { return }
            for x in subtreeGenerator(l, suspending: suspending) { try yield(x) }
            if suspending { try Coroutine.yield() }
            try yield(v)
            for x in subtreeGenerator(r, suspending: suspending) { try yield(x) }
        }
    }

    @Test("recursive generators: each subtree's generator hands on its children's elements, in order")
    func recursiveGenerators() {
        let g = Self.subtreeGenerator(.balanced(0..<200), suspending: false)
        #expect(Array(g) == Array(0..<200))
    }

    @Test("recursive generators inside a coroutine that suspends at every node: in order, while another coroutine runs in between")
    func recursiveGeneratorsSuspendingInCoroutine() async throws {
        let (values, ticks) = try await Kit.run { () -> ([Int], Int) in
            let ticks = Kit.Counter()
            let done = Kit.Box<Bool>(false)
            let ticker = Coroutine.launch {
                while !done.value { _ = ticks.increment(); try Coroutine.yield() }
            }
            let values = Array(Self.subtreeGenerator(.balanced(0..<60), suspending: true))
            let seenWhileWalking = ticks.value
            done.value = true
            try ticker.join()
            return (values, seenWhileWalking)
        }
        #expect(values == Array(0..<60))
        // Each of the 60 node yields suspended the consumer coroutine and let the ticker run.
        #expect(ticks >= 60, "the other coroutine ran \(ticks) times while the walk suspended 60 times")
    }

    /// Hands every element of `s` out through `yield`, from generic code.
    private static func emitAll<S: Sequence>(_ s: S, into yield: Yield<S.Element>) throws {
        for e in s { try yield(e) }
    }

    /// A generator of `items`, whatever their type.
    private static func generated<T>(_ items: [T]) -> Generator<T> {
        Generator<T> { yield in for item in items { try yield(item) } }
    }

    @Test("yield called from generic code, and as a function value, hands out the same elements")
    func yieldFromGenericCodeAndAsFunctionValue() {
        let g = Generator<String> { yield in
            try Self.emitAll(["a", "b"], into: yield)
            try ["c", "d"].forEach(yield.callAsFunction)
            let f: (String) throws -> Void = yield.callAsFunction
            try f("e")
        }
        #expect(Array(g) == ["a", "b", "c", "d", "e"])
        #expect(Array(Self.generated([1.5, 2.5])) == [1.5, 2.5])
        #expect(Array(Self.generated([[1], [2, 3]])) == [[1], [2, 3]])
    }

    /// An element whose lifetime the tests below watch.
    private final class Tracked {
        let n: Int
        init(_ n: Int) { self.n = n }
    }

    private final class WeakTracked {
        weak var object: Tracked?
        init(_ object: Tracked) { self.object = object }
    }

    @Test("an element handed out by yield lives while the consumer holds it and is freed once it drops it; one passed to a yield that throws after cancellation is freed too")
    func yieldedElementsAreNeitherKeptNorFreedEarly() {
        var watched: [WeakTracked] = []
        do {
            let g = Generator<Tracked> { yield in
                for i in 0..<5 { try yield(Tracked(i)) }
            }
            var held: [Tracked] = []
            while let t = g.next() { held.append(t) }
            watched = held.map(WeakTracked.init)
            // While held, every element is alive and is the one yielded
            #expect(held.map(\.n) == [0, 1, 2, 3, 4])
            #expect(watched.allSatisfy { $0.object != nil })
        }
        // Once dropped (and the generator with them), none is kept
        #expect(watched.allSatisfy { $0.object == nil })

        var refused: [WeakTracked] = []
        do {
            let g = Generator<Tracked> { yield in
                try? yield(Tracked(0))   // pending when cancelled: throws
                for i in 1...3 {          // after cancellation: each throws at once
                    let t = Tracked(i)
                    refused.append(WeakTracked(t))
                    if (try? yield(t)) != nil { return }
                }
            }
            #expect(g.next()?.n == 0)
            g.cancel()
            #expect(g.next() == nil)
        }
        #expect(refused.count == 3)
        #expect(refused.allSatisfy { $0.object == nil })
    }

    @Test("a nested generator started inside a body and released there is unwound there")
    func nestedReleaseInsideBody() {
        var log: [String] = []
        let outer = Generator<Int> { yield in
            do {
                let inner = Generator<Int> { y in
                    defer { log.append("inner defer") }
                    var i = 100
                    while true { try y(i); i += 1 }
                }
                try yield(inner.next()!)
                try yield(inner.next()!)
            }
            log.append("inner released")
            try yield(0)
        }
        #expect(Array(outer) == [100, 101, 0])
        #expect(log == ["inner defer", "inner released"])
    }

    @Test("many generators alternate without mixing their stacks")
    func interleavedGenerators() {
        let gs = (0..<50).map { k in
            Generator<Int> { yield in
                var local = [Int](repeating: k, count: 16)   // lives on across the switches
                for i in 0..<100 { local[i % 16] = k; try yield(local.reduce(0, +) + i) }
            }
        }
        for i in 0..<100 {
            for (k, g) in gs.enumerated() { #expect(g.next() == 16 * k + i) }
        }
        #expect(gs.allSatisfy { $0.next() == nil })
    }

    // MARK: Element ownership

    @Test("a yielded nil of an Optional element type is an element: iteration goes on to the body's end")
    func optionalNilIsAnElement() {
        let g = Generator<Int?> { yield in
            try yield(1)
            try yield(nil)
            try yield(nil)
            try yield(4)
        }
        var got: [Int?] = []
        while let x = g.next() { got.append(x) }
        #expect(got == [1, nil, nil, 4])
        #expect(g.next() == nil)
        let generic = Generator<CountedElement?> { yield in try yield(nil); try yield(nil) }
        #expect(drainGenerically(generic).count == 2)
    }

    @Test("elements with reference semantics are neither leaked nor freed twice: exhausted, released or cancelled after any number of elements, ended by a throw, or cancelled while the body catches the cancellation and tries to yield again")
    func elementsAreHandedOverOnce() {
        let counter = ElementCounter()
        enum End: CaseIterable { case release, cancel, cancelThenNext, throwAtTwo, catchAndYieldAgain, yieldMoreAtOne }
        for taken in 0..<6 {
            for end in End.allCases {
                var received: [Int] = []
                do {
                    let g = Generator<CountedElement> { yield in
                        for i in 0..<4 {
                            if end == .throwAtTwo && i == 2 { throw BodyError(code: i) }
                            do {
                                try yield(CountedElement(counter, i))
                            } catch {
                                guard end == .catchAndYieldAgain else { throw error }
                                for k in 0..<3 { try? yield(CountedElement(counter, 100 + k)) }
                                return
                            }
                            if end == .yieldMoreAtOne && i == 1 {
                                try yield(CountedElement(counter, 50))
                                try yield(CountedElement(counter, 51))
                            }
                        }
                    }
                    for _ in 0..<taken { if let x = g.next() { received.append(x.n) } }
                    if end == .cancel || end == .cancelThenNext || end == .catchAndYieldAgain { g.cancel() }
                    if end == .cancelThenNext { #expect(g.next() == nil) }
                }
                let expected = end == .yieldMoreAtOne ? [0, 1, 50, 51, 2, 3] : end == .throwAtTwo ? [0, 1] : [0, 1, 2, 3]
                #expect(received == Array(expected.prefix(taken)), "\(end) after \(taken)")
                #expect(counter.live == 0, "\(end) after \(taken): \(counter.live) elements alive")
            }
        }
    }

    @Test("strings, existentials and large structs holding references are moved out intact, and none is leaked whether drained, released or cancelled")
    func nonTrivialElementsAreMovedOutIntact() {
        let counter = ElementCounter()
        do {
            let strings = Generator<String> { yield in
                for i in 0..<5 { try yield(String(repeating: "x", count: 100 * i + 1)) }
            }
            #expect(drainGenerically(strings).map(\.count) == [1, 101, 201, 301, 401])
            let existentials = Generator<any CountedValue> { yield in
                for i in 0..<5 { try yield(CountedElement(counter, i)) }
            }
            #expect(drainGenerically(existentials, upTo: 3).map(\.n) == [0, 1, 2])
            let anys = Generator<Any> { yield in
                for i in 0..<5 { try yield(CountedElement(counter, i)); try yield("s\(i)"); try yield(i) }
            }
            #expect(drainGenerically(anys, upTo: 7).map { "\($0 is CountedElement ? "c" : "\($0)")" }
                    == ["c", "s0", "0", "c", "s1", "1", "c"])
            let large = Generator<LargeElement> { yield in
                for i in 0..<5 {
                    try yield(LargeElement(head: CountedElement(counter, i), text: "large \(i) " + String(repeating: "y", count: 50),
                                           tail: [CountedElement(counter, i), CountedElement(counter, i)],
                                           extra: i % 2 == 0 ? CountedElement(counter, i) : nil))
                }
            }
            let taken = drainGenerically(large, upTo: 3)
            #expect(taken.map(\.head.n) == [0, 1, 2])
            #expect(taken.map { $0.tail.map(\.n) } == [[0, 0], [1, 1], [2, 2]])
            #expect(taken.map { $0.extra?.n } == [0, nil, 2])
            #expect(taken[1].text.hasPrefix("large 1 yyy"))
            let cancelled = Generator<LargeElement> { yield in
                for i in 0..<3 { try yield(LargeElement(head: CountedElement(counter, i), text: "t", tail: [])) }
            }
            _ = cancelled.next()
            cancelled.cancel()
            #expect(cancelled.next() == nil)
        }
        #expect(counter.live == 0)
    }

    @Test("nested generators of class elements, the outer released after any number of elements, leak none")
    func nestedGeneratorElementsAreFreed() {
        let counter = ElementCounter()
        for taken in 0..<8 {
            var received: [Int] = []
            do {
                let outer = Generator<CountedElement> { yield in
                    let inner = Generator<CountedElement> { y in for i in 0..<3 { try y(CountedElement(counter, i)) } }
                    while let v = inner.next() { try yield(v); try yield(CountedElement(counter, 10 + v.n)) }
                    let unfinished = Generator<CountedElement> { y in for i in 20..<23 { try y(CountedElement(counter, i)) } }
                    try yield(unfinished.next()!)
                }
                for _ in 0..<taken { if let x = outer.next() { received.append(x.n) } }
            }
            #expect(received == Array([0, 10, 1, 11, 2, 12, 20].prefix(taken)))
            #expect(counter.live == 0, "after \(taken): \(counter.live) elements alive")
        }
    }

    @Test("elements yielded by a body that suspends its consumer coroutine are all freed when the consumer is cancelled inside the body")
    func elementsFreedWhenConsumerCancelledInsideBody() async throws {
        let counter = ElementCounter()
        try await Kit.run {
            for useDelay in [false, true] {
                let waiting = Promise<Void>()
                let consumer = Coroutine.launch {
                    let g = Generator<CountedElement> { yield in
                        try yield(CountedElement(counter, 0))
                        if useDelay { try Coroutine.delay(.milliseconds(1)) } else { try Coroutine.yield() }
                        try yield(CountedElement(counter, 1))
                        let pending = CountedElement(counter, 2)
                        waiting.fulfill(())
                        try Coroutine.delay(hangBound)
                        try yield(pending)
                    }
                    var got: [CountedElement] = []
                    while let x = g.next() { got.append(x) }
                    #expect(got.map(\.n) == [0, 1])
                    #expect(g.error is CancellationError)
                }
                try waiting.await()
                consumer.cancel()
                try consumer.join()
            }
        }
        #expect(counter.live == 0)
    }

    @Test("a body that catches its consumer coroutine's cancellation inside delay goes on yielding, and its elements are all freed")
    func bodyCatchesConsumerCancellationAndYields() async throws {
        let counter = ElementCounter()
        let got = try await Kit.run { () -> [Int] in
            let waiting = Promise<Void>()
            let out = Kit.Log<Int>()
            let consumer = Coroutine.launch {
                let g = Generator<CountedElement> { yield in
                    try yield(CountedElement(counter, 0))
                    waiting.fulfill(())
                    do { try Coroutine.delay(hangBound) } catch { try yield(CountedElement(counter, 1)) }
                    try yield(CountedElement(counter, 2))
                }
                while let x = g.next() { out.append(x.n) }
            }
            try waiting.await()
            consumer.cancel()
            try consumer.join()
            return out.all
        }
        #expect(got == [0, 1, 2])
        #expect(counter.live == 0)
    }

    @Test("two coroutines on one scheduler drive one generator in turn, each getting the next element, and the one that releases it unwinds the body on its behalf")
    func twoCoroutinesDriveOneGenerator() async throws {
        let counter = ElementCounter()
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            final class Shared: @unchecked Sendable { var g: Generator<CountedElement>? }
            let shared = Shared()
            shared.g = Generator<CountedElement> { yield in
                defer { log.append("unwound for \(Coroutine.current?.name ?? "none")") }
                var i = 0
                while true { try yield(CountedElement(counter, i)); i += 1 }
            }
            let a = Coroutine.launch(name: "A") {
                for _ in 0..<3 { log.append("A got \(shared.g!.next()!.n)"); try Coroutine.yield() }
            }
            let b = Coroutine.launch(name: "B") {
                for _ in 0..<3 { log.append("B got \(shared.g!.next()!.n)"); try Coroutine.yield() }
                try a.join()
                shared.g = nil
            }
            try a.join()
            try b.join()
            return log.all
        }
        let got = log.dropLast().map { Int($0.split(separator: " ").last!)! }
        #expect(got == Array(0..<6), "\(log)")
        #expect(Set(log.dropLast().map { $0.prefix(1) }) == ["A", "B"], "\(log)")
        #expect(log.last == "unwound for B", "\(log)")
        #expect(counter.live == 0)
    }

    @Test("a suspended generator released by another coroutine than the one it last ran for unwinds on the releaser's behalf, even across a suspension in its defer")
    func releaseByAnotherCoroutineUnwindsThere() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            final class Shared: @unchecked Sendable { var g: Generator<Int>? }
            let shared = Shared()
            let a = Coroutine.launch(name: "A") {
                let g = Generator<Int> { yield in
                    defer {
                        log.append("defer for \(Coroutine.current?.name ?? "none")")
                        try? Coroutine.delay(.milliseconds(1))
                        log.append("defer after delay for \(Coroutine.current?.name ?? "none")")
                    }
                    for i in 0..<10 { try yield(i) }
                }
                _ = g.next()
                shared.g = g
            }
            try a.join()
            let b = Coroutine.launch(name: "B") {
                log.append("B releases")
                shared.g = nil
                log.append("B released")
            }
            try b.join()
            return log.all
        }
        #expect(log == ["B releases", "defer for B", "defer after delay for B", "B released"])
    }

    // MARK: Timeout scopes

    /// Guards an invariant (a coroutine counts its expired timeout scopes).
    @Test("a generator suspended inside withTimeout, resumed by another coroutine after its first host finished")
    func generatorTimeoutScopeOutlivesHost() async throws {
        try await Kit.withScheduler("gen") { s in
            let slot = GeneratorSlot()
            let weak = WeakCoroutineRef()
            func startHost(_ duration: Duration) async throws {
                let h1 = Coroutine.launch(on: s) {
                    let g = Generator<Int> { y in
                        try Coroutine.withTimeout(duration) { try y(1); try y(2) }
                    }
                    _ = g.next()
                    slot.g = g
                }
                weak.c = h1
                try await h1.join()
            }
            for duration: Duration in [.seconds(30), .milliseconds(1)] {
                try await startHost(duration)
                // A job after the join runs after the loop reaped the finished host.
                let aliveAfterReap = try await Kit.onSchedulerLoop(s) { weak.c != nil }
                // The scope's bookkeeping (and, for the short one, its timer) refers to the first host.
                #expect(aliveAfterReap, "the host was freed while a generator body was still inside its withTimeout scope")
                let h2 = Coroutine.launch(on: s) {
                    if duration < .seconds(1) { try Coroutine.delay(.milliseconds(5)) }   // the scope's timer fires
                    let g = slot.g!
                    slot.g = nil
                    var got: [Int] = []
                    while let v = g.next() { got.append(v) }
                    #expect(got == [2])
                    #expect(Coroutine.current!.expiredTimeoutScopes == 0)
                }
                try await h2.join()
                #expect(h2.error == nil)
                #expect(try await Kit.onSchedulerLoop(s) { weak.c == nil })
            }
        }
    }
}
