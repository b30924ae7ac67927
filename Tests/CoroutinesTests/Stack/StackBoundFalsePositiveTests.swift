import CoroutinesTestSupport
import Foundation
import Testing
@testable import Coroutines

// The stack-bound check at the runtime's entry points (ccoro_check_stack_bound) must never fire
// for code that runs on the stack the thread-local record describes: generator bodies (their own
// stack) in coroutines and on plain threads, suspensions and launches inside them, runBlocking
// inside a generator body, and a plain thread's own stack after coroutines ran on it. A false
// positive aborts the process, hence the child process.
extension StackExitTests {
    @Test("generator bodies that suspend, launch and drive runBlocking pass the stack-bound check")
    func generatorsPassTheStackBoundCheck() async {
        await ChildProcess.run(.success, id: "generatorsPassTheStackBoundCheck") {
            try await CoroutineTestKit.onPlainThread {
                // Given a generator consumed by a coroutine, whose body delays, launches,
                // awaits and nests another generator
                let total = try Coroutine.runBlocking { () -> Int in
                    let g = Generator<Int> { yield in
                        for i in 0..<3 {
                            try Coroutine.delay(.milliseconds(1))
                            let inner = Generator<Int> { y in try Coroutine.yield(); try y(i) }
                            try yield(try Coroutine.async { 0 }.await() + inner.next()! + (inner.next() ?? 0))
                            Coroutine.launch {}
                        }
                    }
                    return g.reduce(0, +)
                }
                // And a generator on a plain thread whose body runs runBlocking, then launches
                let plain = Generator<Int> { yield in
                    try yield(try Coroutine.runBlocking { try Coroutine.async { 10 }.await() })
                    _ = Coroutine.async { 1 }
                    Coroutine.launch {}
                    try yield(20)
                }
                let after = plain.reduce(0, +)
                // And a launch from the plain thread's own stack after all of it
                _ = try Coroutine.runBlocking { try Coroutine.async { 1 }.await() }
                Coroutine.launch {}
                if total != 3 || after != 30 { exit(10) }
            }
        }
    }
}
