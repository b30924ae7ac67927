import CCoroutines
import Foundation
import CoroutinesTestSupport
import Testing
@testable import Coroutines

private struct BodyFailure: Error {}

/// Generator traps and stack accounting, each in a child process: see the Generators and
/// BadInputAndMisuse articles (<doc:Generators>, <doc:BadInputAndMisuse>).
@Suite("Generators, in a child process", .serialized, .enabled(if: TestEnvironment.exitTestsEnabled))
struct GeneratorExitTests {
    @Test("next() from inside the generator's own body traps with 'generator already running'")
    func reentrantNext() async {
        let result = await ChildProcess.run(.failure, id: "reentrantNext") {
            let holder = GeneratorHolder<Int>()
            let g = Generator<Int> { yield in
                try yield(1)
                _ = holder.generator?.next()
                try yield(2)
            }
            holder.generator = g
            _ = g.next()
            _ = g.next()
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("generator already running"), "stderr: \(stderr)")
    }

    @Test("next() on another thread than the one the body suspended on traps")
    func otherThread() async {
        let result = await ChildProcess.run(.failure, id: "otherThread") {
            let g = Generator<Int> { yield in
                var i = 0
                while true { try yield(i); i += 1 }
            }
            _ = g.next()
            nonisolated(unsafe) let unsafeG = g
            let t = Thread { _ = unsafeG.next() }
            t.start()
            while true { sleep(1) }   // the other thread traps and ends the process
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("generator resumed on a different thread"), "stderr: \(stderr)")
    }

    @Test("cancel() on another thread than the one the body suspended on traps, and the body does not run there")
    func cancelOnOtherThread() async {
        let result = await ChildProcess.run(.failure, id: "cancelOnOtherThread") {
            let g = Generator<Int> { yield in
                defer { FileHandle.standardError.write(Data("body unwound\n".utf8)) }
                var i = 0
                while true { try yield(i); i += 1 }
            }
            _ = g.next()
            nonisolated(unsafe) let unsafeG = g
            let t = Thread { unsafeG.cancel() }
            t.start()
            while true { sleep(1) }   // the other thread traps and ends the process
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("generator resumed on a different thread"), "stderr: \(stderr)")
        #expect(!stderr.contains("body unwound"), "stderr: \(stderr)")
    }

    @Test("a body that swallows cancellation forever traps with 'generator body ignores cancellation'")
    func endlessSwallowingBody() async {
        let result = await ChildProcess.run(.failure, id: "endlessSwallowingBody") {
            let g = Generator<Int> { yield in
                var i = 0
                while true { try? yield(i); i += 1 }
            }
            _ = g.next()
            g.cancel()
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("generator body ignores cancellation"), "stderr: \(stderr)")
    }

    @Test("up to 1,000 swallowed yields after cancellation are allowed")
    func limitIsOneThousand() async {
        await ChildProcess.run(.success, id: "limitIsOneThousand") {
            var count = 0
            let g = Generator<Int> { yield in
                try? yield(0)                                  // the pending one, resumed by cancel
                for i in 1...1000 { if (try? yield(i)) == nil { count += 1 } }
            }
            _ = g.next()
            g.cancel()
            if count != 1000 { exit(3) }
        }
    }

    @Test("a yield escaped from its body and called outside it traps")
    func escapedYield() async {
        let result = await ChildProcess.run(.failure, id: "escapedYield") {
            var escaped: Yield<Int>?
            let g = Generator<Int> { yield in escaped = yield; try yield(1) }
            _ = g.next()
            try escaped?(2)
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("yield used outside its generator's body"), "stderr: \(stderr)")
    }

    @Test("a nested generator's body that calls the outer body's yield traps with 'yield used outside its generator's body'")
    func outerYieldFromNestedBody() async {
        let result = await ChildProcess.run(.failure, id: "outerYieldFromNestedBody") {
            let outer = Generator<Int> { outerYield in
                try outerYield(1)
                let inner = Generator<Int> { innerYield in
                    try innerYield(10)
                    FileHandle.standardError.write(Data("inner body calls the outer yield\n".utf8))
                    try outerYield(2)   // the outer body is running, but this is the inner stack
                    FileHandle.standardError.write(Data("the outer yield returned\n".utf8))
                    try innerYield(11)
                }
                while let v = inner.next() { try outerYield(v) }
            }
            while outer.next() != nil {}
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("inner body calls the outer yield"), "stderr: \(stderr)")
        #expect(stderr.contains("yield used outside its generator's body"), "stderr: \(stderr)")
        #expect(!stderr.contains("the outer yield returned"), "stderr: \(stderr)")
    }

    @Test("a yield escaped from a finished body and called in another generator's body, on the stack the first one gave back, traps")
    func escapedYieldOnReusedStack() async {
        let result = await ChildProcess.run(.failure, id: "escapedYieldOnReusedStack") {
            var escaped: Yield<Int>?
            let first = Generator<Int> { yield in escaped = yield; try yield(1) }
            _ = first.next()
            let firstStack = first.frame.pointee.stackLow
            while first.next() != nil {}   // finished: its stack went back to the pool
            var second: Generator<Int>!
            second = Generator<Int> { yield in
                if second.frame.pointee.stackLow == firstStack {
                    FileHandle.standardError.write(Data("on the first body's stack\n".utf8))
                }
                try callEscapedYield(escaped, then: yield)
            }
            _ = second.next()
            withExtendedLifetime(first) {}
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("on the first body's stack"), "stderr: \(stderr)")
        expectEscapedYieldTrapped(stderr)
    }

    @Test("a suspended generator's yield called from another generator's body traps")
    func suspendedGeneratorsYieldFromOtherBody() async {
        let result = await ChildProcess.run(.failure, id: "suspendedGeneratorsYieldFromOtherBody") {
            var escaped: Yield<Int>?
            let first = Generator<Int> { yield in escaped = yield; try yield(1); try yield(2) }
            _ = first.next()   // suspended in its first yield
            let second = Generator<Int> { yield in
                try callEscapedYield(escaped, then: yield)
            }
            _ = second.next()
            withExtendedLifetime(first) {}
        }
        let stderr = result?.standardError ?? ""
        expectEscapedYieldTrapped(stderr)
    }

    @Test("after cancellation the 1,000th swallowed yield still throws and the 1,001st traps")
    func limitBoundary() async {
        let result = await ChildProcess.run(.failure, id: "limitBoundary") {
            let g = Generator<Int> { yield in
                try? yield(0)                                  // the pending one, resumed by cancel
                for i in 1...1000 { _ = try? yield(i) }
                FileHandle.standardError.write(Data("1000 swallowed\n".utf8))
                _ = try? yield(1001)
                FileHandle.standardError.write(Data("1001 swallowed\n".utf8))
            }
            _ = g.next()
            g.cancel()
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("1000 swallowed"), "stderr: \(stderr)")
        #expect(stderr.contains("generator body ignores cancellation"), "stderr: \(stderr)")
        #expect(!stderr.contains("1001 swallowed"), "stderr: \(stderr)")
    }

    @Test("a suspended generator released on another thread leaks its stack and reports it")
    func foreignRelease() async {
        let result = await ChildProcess.run(.success, id: "foreignRelease") {
            var g: Generator<Int>? = Generator<Int> { yield in while true { try yield(1) } }
            _ = g!.next()
            nonisolated(unsafe) var moved = g
            g = nil
            let t = Thread { moved = nil }
            t.start()
            while !t.isFinished { usleep(1000) }
            _ = moved
        }
        guard let result else { return }   // in the child process, whose test ends here
        let stderr = result.standardError
        #expect(stderr.contains("released on a thread other than"), "stderr: \(stderr)")
    }

    @Test("stack overflow in a generator body is reported like a coroutine's")
    func overflow() async {
        let result = await ChildProcess.run(.failure, id: "overflow") {
            let g = Generator<Int>(stackSize: 64 * 1024) { yield in try yield(recurseWithoutBound(0)) }
            _ = g.next()
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("coroutine stack overflow in 'generator'"), "stderr: \(stderr)")
    }

    @Test("stack overflow in a generator body, after it suspended its coroutine, is reported for the generator's stack")
    func overflowAfterSuspensionInCoroutine() async {
        let result = await ChildProcess.run(.failure, id: "overflowAfterSuspensionInCoroutine") {
            let s = CoroutineScheduler(name: "overflow")
            let c = Coroutine.launch(on: s, name: "consumer") {
                let g = Generator<Int>(stackSize: 64 * 1024) { yield in
                    try Coroutine.delay(.milliseconds(1))
                    try yield(recurseWithoutBound(0))
                }
                _ = g.next()
            }
            try await c.join()
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("coroutine stack overflow in 'generator' (stack size 65536"), "stderr: \(stderr)")
    }

    @Test("a yield on a slab stack whose canary was smashed reports the overflow for the generator's stack")
    func smashedCanaryAtYield() async {
        let result = await ChildProcess.run(.failure, id: "smashedCanaryAtYield") {
            let smashed = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
            smashed.initialize(to: 0)
            let g = Generator<Int>(stackSize: 64 * 1024) { yield in
                try yield(1)
                // As on a slab stack after a frame ran past its end into the canary below it.
                // (Pointing the frame's canary at a smashed word stands in for the overrun.)
                yield.frame.pointee.canary = UnsafePointer(smashed)
                try yield(2)
                print("not stopped")
            }
            #expect(g.next() == 1)
            _ = g.next()
        }
        let (stderr, stdout) = (result?.standardError ?? "", result?.standardOutput ?? "")
        #expect(stderr.contains("coroutine stack overflow in 'generator'"), "stderr: \(stderr)")
        #expect(stderr.contains("stack canary smashed"), "stderr: \(stderr)")
        #expect(!stdout.contains("not stopped"))
    }

    @Test("no stack is leaked: cancelled, released, exhausted and failed generators give their stacks back")
    func stackAccounting() async {
        await ChildProcess.run(.success, id: "stackAccounting") {
            let allocator = StackAllocator.shared
            // Warm the pool so that later takes reuse pooled stacks.
            do { let g = Generator<Int> { try $0(1) }; _ = g.next() }
            let inUse = allocator.stacksInUse
            let pooled = allocator.stacksPooled
            var defers = 0
            for round in 0..<1_000 {
                let g = Generator<Int> { yield in
                    defer { defers += 1 }
                    var i = 0
                    while round % 4 != 2 || i < 3 {
                        try yield(i); i += 1
                        if round % 4 == 3 && i == 2 { throw BodyFailure() }
                    }
                }
                _ = g.next()
                _ = g.next()
                if allocator.stacksInUse != inUse + 1 { exit(10) }   // exactly one stack held
                switch round % 4 {
                case 0: g.cancel()
                case 1: break                                          // released below
                case 2: while g.next() != nil {}                        // body returns
                default: _ = g.next()                                 // body throws
                }
            }
            if defers != 1_000 { exit(11) }
            if allocator.stacksInUse != inUse { exit(12) }
            if allocator.stacksPooled != pooled { exit(13) }
        }
    }
}

/// A second generator's body: calls the first body's `escaped` yield (which must trap with "yield
/// used outside its generator's body"), saying so on stderr before and, if it returned, after.
private func callEscapedYield(_ escaped: Yield<Int>?, then yield: Yield<Int>) throws {
    FileHandle.standardError.write(Data("second body calls the first body's yield\n".utf8))
    try escaped?(2)
    FileHandle.standardError.write(Data("the escaped yield returned\n".utf8))
    try yield(3)
}

/// What the child's stderr shows when `callEscapedYield` trapped in the escaped yield.
private func expectEscapedYieldTrapped(_ stderr: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(stderr.contains("second body calls the first body's yield"), "stderr: \(stderr)", sourceLocation: sourceLocation)
    #expect(stderr.contains("yield used outside its generator's body"), "stderr: \(stderr)", sourceLocation: sourceLocation)
    #expect(!stderr.contains("the escaped yield returned"), "stderr: \(stderr)", sourceLocation: sourceLocation)
}
