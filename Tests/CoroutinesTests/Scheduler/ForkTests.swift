import CCoroutines
import CoroutinesTestSupport
import Foundation
import Synchronization
import Testing
@testable import Coroutines

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

/// What the runtime does in a child made by `fork()` (``ForkGuard``, <doc:BlockingAndStopping>):
/// every launch finishes with `CoroutineError.forkedProcess` without running, `runBlocking` and
/// suspending calls throw it, and the parent's schedulers go on working.
///
/// Each test forks a real child of the test process. The child reports the checks that failed
/// through a pipe and ends with `_exit` (no atexit handler, no stdio flush of the parent's
/// buffers); the parent reads the pipe to its end and reaps the child, killing it and failing
/// if it has not ended after `childLimit` (a hang bound: the child alone needs milliseconds, and
/// the whole test took 9 s in the loaded parallel run). Before forking, the parent runs every
/// path the child will take (the same launches, errors, casts and string building), so that the
/// child finds Swift metadata and conformances already made and takes no lock another thread
/// might have held at the fork (glibc's malloc is fork-safe).
///
/// Serialized as a precaution, not after a flake (none was seen in the parallel run, nor under
/// ThreadSanitizer): the two tests fork, and each warms its own schedulers; one at a time, no
/// fork happens while the other test's threads start or its paths are being warmed. Other
/// suites still run in parallel with them; the child touches nothing they use.
///
/// Skipped with the other child-process tests in the ThreadSanitizer run (`COROUTINES_EXIT_TESTS=0`):
/// a child forked from a process of many threads under TSan can wait for ever on a lock of TSan's
/// own runtime that another thread held at the fork (CI saw the child spin for 60 s once); they
/// run in the plain and release-build test steps.
@Suite("Forked child processes", .serialized,
       .enabled(if: TestEnvironment.exitTestsEnabled, "COROUTINES_EXIT_TESTS=0 (the ThreadSanitizer run)"))
struct ForkTests {
    /// How long the parent waits for a child before it kills it and fails.
    static let childLimit: Duration = .seconds(60)

    /// Given a default pool, a user pool, a dedicated scheduler and main, warmed in the parent,
    /// when a plain thread forks, then in the child each launch finishes with `forkedProcess`
    /// without running its body, `runBlocking` throws it without running its body, a suspending
    /// call outside a coroutine throws it; and after the child ended, the parent's schedulers
    /// still run coroutines.
    ///
    /// Forks from a child process of its own (``ChildProcess``), which runs only this test: in
    /// the whole parallel suite, another test's thread held a lock at the fork often enough for
    /// the forked child to wait on it for ever (CI saw it twice in a row).
    @Test("in a forked child, launches finish with forkedProcess without running and runBlocking throws it; the parent goes on")
    func launchesInForkedChild() async {
        await ChildProcess.run(.success, id: "launchesInForkedChild") { try await Self.forkFromPlainThread() }
    }

    static func forkFromPlainThread() async throws {
        let defaultPool = SchedulerPool.default(for: .default)
        guard let pool = SchedulerPool(name: "fork.pool", count: 1) else { Issue.record("no pool"); return }
        defer { pool.stop() }
        let dedicated = CoroutineScheduler(name: "fork.dedicated")
        defer { dedicated.stop() }
        let bodiesRun = Kit.Counter()

        // Everything the child does, as a list of the checks that failed (empty: all passed).
        // `inChild` false runs the same paths in the parent, to warm them; the outcome is then
        // ignored (nothing is forked there, so the launches run), but the launches are awaited
        // and looked at as the child looks at its own: no thread of the parent may still be
        // making Swift metadata the child needs when it forks (the child would wait forever for
        // the runtime's lock, which that thread held: seen once in 35 runs before).
        let checks: @Sendable (_ inChild: Bool) -> [String] = { inChild in
            var failed: [String] = []
            var launched: [Coroutine] = []
            var promised: [Promise<Int>] = []
            let runsBefore = bodiesRun.value
            func expectForked(_ what: String, _ c: Coroutine) {
                launched.append(c)
                if !c.isFinished || (c.error as? CoroutineError) != .forkedProcess {
                    failed.append("\(what): finished \(c.isFinished), error \(String(describing: c.error))")
                }
            }
            func expectForked(_ what: String, _ p: Promise<Int>) {
                promised.append(p)
                guard case .failure(let e)? = p.result, (e as? CoroutineError) == .forkedProcess else {
                    failed.append("\(what): promise \(String(describing: p.result))"); return
                }
            }
            func expectForked(_ what: String, _ body: () throws -> Void) {
                do { try body(); failed.append("\(what): returned") } catch {
                    if (error as? CoroutineError) != .forkedProcess { failed.append("\(what): threw \(error)") }
                }
            }
            expectForked("launch onto the default pool", Coroutine.launch(on: defaultPool) { bodiesRun.increment() })
            expectForked("launch without on:", Coroutine.launch { bodiesRun.increment() })
            expectForked("async onto the default pool", Coroutine.async(on: defaultPool) { bodiesRun.increment() })
            expectForked("launch onto a user pool", Coroutine.launch(on: pool) { bodiesRun.increment() })
            expectForked("async onto a user pool", Coroutine.async(on: pool) { bodiesRun.increment() })
            expectForked("launch onto a pool scheduler", Coroutine.launch(on: pool.next()) { bodiesRun.increment() })
            expectForked("launch onto a dedicated scheduler", Coroutine.launch(on: dedicated) { bodiesRun.increment() })
            expectForked("async onto a dedicated scheduler", Coroutine.async(on: dedicated) { bodiesRun.increment() })
            // (Not in the parent: nothing drives main in the test process, so it would stay queued.)
            if inChild { expectForked("launch onto main", Coroutine.launch(on: .main) { bodiesRun.increment() }) }
            expectForked("runBlocking") { _ = try Coroutine.runBlocking { bodiesRun.increment() } }
            expectForked("delay outside a coroutine") { try Coroutine.delay(.milliseconds(1)) }
            expectForked("await of a pending promise") { _ = try Promise<Int>().await() }
            if bodiesRun.value != runsBefore { failed.append("\(bodiesRun.value - runsBefore) bodies ran") }
            if !inChild {
                _ = try? Coroutine.runBlocking {
                    for c in launched { try c.join() }
                    for p in promised { _ = try? p.await() }
                }
                let rejected = Promise<Int>()
                _ = rejected.reject(CoroutineError.forkedProcess)
                for c in launched { expectForked("warm-up", c) }
                for p in promised + [rejected] { expectForked("warm-up", p) }
            }
            return failed
        }

        // Given every path the child takes, taken once in the parent on a plain thread (as the
        // child's: runBlocking refuses Swift concurrency threads)
        try await Kit.onPlainThread { _ = checks(false) }
        _ = CoroutineScheduler.main

        // When a plain thread forks and the child runs the checks
        let child = try await Kit.onPlainThread { ForkedChild.run(Self.childLimit) { checks(true) } }

        // Then the child passed every check
        #expect(child.failures == [], "\(child)")
        #expect(child.exitedNormally, "\(child)")

        // And the parent's schedulers still run coroutines
        let answers = try await Kit.run {
            try [Coroutine.async(on: defaultPool) { 1 }, Coroutine.async(on: pool) { 2 },
                 Coroutine.async(on: dedicated) { 3 }].map { try $0.await() }
        }
        #expect(answers == [1, 2, 3])
    }

    /// Given a coroutine on a dedicated scheduler, when it forks, then in the child its own
    /// suspending calls throw `forkedProcess` (the fork handler sends it down the interrupt
    /// path), and what it launches finishes with that error; the coroutine in the parent goes on.
    /// Also from a child process of its own, for the reason given above.
    @Test("in a child forked by a coroutine, that coroutine's suspending calls throw forkedProcess")
    func coroutineThatForks() async {
        await ChildProcess.run(.success, id: "coroutineThatForks") { try await Self.forkFromCoroutine() }
    }

    static func forkFromCoroutine() async throws {
        let dedicated = CoroutineScheduler(name: "fork.coroutine")
        defer { dedicated.stop() }
        let checks: @Sendable () -> [String] = {
            var failed: [String] = []
            func expectForked(_ what: String, _ body: () throws -> Void) {
                do { try body(); failed.append("\(what): returned") } catch {
                    if (error as? CoroutineError) != .forkedProcess { failed.append("\(what): threw \(error)") }
                }
            }
            expectForked("yield") { try Coroutine.yield() }
            expectForked("delay") { try Coroutine.delay(.milliseconds(1)) }
            expectForked("join") { try Coroutine.launch(on: dedicated) {}.join() }
            expectForked("await of a child") { _ = try Coroutine.async { 1 }.await() }
            expectForked("channel send") { try Channel<Int>(capacity: 1).send(1) }
            return failed
        }
        // Given those paths taken once by a coroutine on the same scheduler (where they do not
        // throw: only warms them), and the paths a launch takes in the child (a named launch is
        // created at once, as every launch is there; a promise rejected)
        _ = try await Coroutine.async(on: dedicated) {
            _ = try Coroutine.async(name: "fork.warm-up") { 1 }.await()
            _ = Promise<Int>().reject(CoroutineError.forkedProcess)
            return checks()
        }.value
        // When a coroutine forks
        let child = try await Coroutine.async(on: dedicated) { ForkedChild.start { checks() } }.value
        let outcome = try await Kit.onPlainThread { child.wait(Self.childLimit) }
        // Then the child passed every check, and the parent's coroutine on that scheduler goes on
        #expect(outcome.failures == [], "\(outcome)")
        #expect(outcome.exitedNormally, "\(outcome)")
        let after = try await Kit.run { try Coroutine.async(on: dedicated) { try Coroutine.yield(); return 7 }.await() }
        #expect(after == 7)
    }
}

/// A child process made by `fork()` that runs a list of checks and reports the failed ones.
private struct ForkedChild: Sendable {
    let pid: pid_t
    let readEnd: Int32

    /// How the child ended and what it reported.
    struct Outcome: Sendable, CustomStringConvertible {
        var failures: [String]
        /// Exited with status 0 after reporting (not killed, not crashed, not hung).
        var exitedNormally: Bool
        var detail: String
        var description: String { "\(detail); failures: \(failures)" }
    }

    /// Forks; the child runs `checks`, writes each failure on a line of the pipe and `_exit`s
    /// (status 0 if none failed, 1 otherwise); the parent gets the child's pid and the read end.
    /// The report is first built and written once in the parent (to /dev/null), so that the
    /// child's only code not run before the fork is `checks`' own, which the tests warm.
    static func start(_ checks: () -> [String]) -> ForkedChild {
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        precondition(devNull >= 0 && writeAll(report(["warm-up"]), to: devNull), "cannot warm the report")
        close(devNull)
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe: errno \(errno)")
        // Not inherited by processes that other tests spawn meanwhile (they exec).
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let pid = fork()
        precondition(pid >= 0, "fork: errno \(errno)")
        if pid == 0 {
            let failed = checks()
            _exit(writeAll(report(failed), to: fds[1]) ? (failed.isEmpty ? 0 : 1) : 3)
        }
        close(fds[1])
        return ForkedChild(pid: pid, readEnd: fds[0])
    }

    /// The failures, a line each, then "done".
    private static func report(_ failed: [String]) -> [UInt8] {
        Array((failed.map { $0 + "\n" }.joined() + "done\n").utf8)
    }

    /// Writes all of `bytes` to `fd`; false on an error.
    private static func writeAll(_ bytes: [UInt8], to fd: Int32) -> Bool {
        bytes.withUnsafeBytes { all in
            var written = 0
            while written < all.count {
                let n = write(fd, all.baseAddress! + written, all.count - written)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                written += n
            }
            return true
        }
    }

    /// ``start(_:)`` and ``wait(_:)``.
    static func run(_ limit: Duration, _ checks: () -> [String]) -> Outcome {
        start(checks).wait(limit)
    }

    /// Reads the child's report to its end and reaps the child; after `limit`, kills it and
    /// reports a hang. Blocks the calling thread (call it on a plain thread).
    func wait(_ limit: Duration) -> Outcome {
        defer { close(readEnd) }
        let deadline = ContinuousClock.now + limit
        var report: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var hung = true
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            let left = deadline - ContinuousClock.now
            let ms = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
            if poll(&p, 1, max(ms, 1)) <= 0 { continue }   // timeout or EINTR: the loop checks the deadline
            let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { hung = false; break }   // end of file: the child has ended (or closed it)
            report += buffer[0..<n]
        }
        var state = ""
        if hung {
            // What the child was doing, for the failure message (Linux).
            state = ["wchan", "syscall", "stat"].map { f in
                "\(f): " + ((try? String(contentsOfFile: "/proc/\(pid)/\(f)", encoding: .utf8)) ?? "?")
            }.joined(separator: "; ")
            kill(pid, SIGKILL)
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let lines = String(decoding: report, as: UTF8.self).split(separator: "\n").map(String.init)
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        let detail = hung ? "child hung: killed after \(limit) (\(state))"
            : exited ? "child exited with status \(code)" : "child ended by signal \(status & 0x7f)"
        var failures = lines.filter { $0 != "done" }
        if !hung && lines.last != "done" { failures.append("the child did not finish its report") }
        return Outcome(failures: failures, exitedNormally: !hung && exited && code == 0 && lines.last == "done",
                       detail: detail)
    }
}
