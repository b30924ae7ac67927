import Testing
import Foundation
import CoroutinesFoundation
import CoroutinesTestSupport

@Suite("Process.runUntilExit")
struct ProcessTests {
    static func shell(_ script: String) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        return process
    }

    @Test("exit status and both streams are captured")
    func statusAndOutput() async throws {
        let output = try await Coroutine.run {
            try Process.runUntilExit(URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", "echo out; echo err >&2; exit 3"])
        }
        #expect(output.terminationStatus == 3)
        #expect(output.terminationReason == .exit)
        #expect(output.standardOutputText == "out\n")
        #expect(output.standardErrorText == "err\n")
    }

    @Test("large output on both streams does not deadlock, and a peer coroutine runs meanwhile")
    func largeOutput() async throws {
        let (output, ticks) = try await Coroutine.run {
            let ticks = Counter()
            let ticker = Coroutine.launch { while true { try Coroutine.yield(); ticks.increment() } }
            defer { ticker.cancel() }
            let output = try Self.shell("head -c 1000000 /dev/zero; head -c 300000 /dev/zero >&2").runUntilExit()
            return (output, ticks.value)
        }
        #expect(output.terminationStatus == 0)
        #expect(output.standardOutput.count == 1_000_000)
        #expect(output.standardError.count == 300_000)
        #expect(ticks > 0)
    }

    @Test("a missing executable throws run()'s error")
    func missingExecutable() async throws {
        let thrown = try await Coroutine.run {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/nonexistent/tool")
            do { _ = try process.runUntilExit(); return false } catch { return true }
        }
        #expect(thrown)
    }

    @Test("cancelling the coroutine terminates the process")
    func cancellation() async throws {
        let (error, reason) = try await Coroutine.run {
            let process = Self.shell("exec sleep 30")
            // Given a coroutine waiting for a process that would run for 30 s
            let waiter = Coroutine.launch { _ = try process.runUntilExit() }
            while !process.isRunning { try Coroutine.yield() }
            // When the coroutine is cancelled
            waiter.cancel()
            try Coroutine.withTimeout(hangBound) { try waiter.join() }
            // Then it threw CancellationError and the process ended by a signal
            try Coroutine.offload { process.waitUntilExit() }
            return (waiter.error, process.terminationReason)
        }
        #expect(error is CancellationError)
        #expect(reason == .uncaughtSignal)
    }
}
