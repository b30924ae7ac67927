import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs part of a test in a child process of this test binary — the project's replacement for
/// Swift Testing's exit tests (`#expect(processExitsWith:)`).
///
/// Why not exit tests: on this toolchain an exit test reads its child's back channel with a
/// blocking `read` on a Swift concurrency thread until the child ends (seen with gdb:
/// `ExitTest._processRecords(fromBackChannel:)` in `FileHandle.readToEnd()`). Swift Testing runs
/// every test on that pool of one or two threads, so while one child ran, every other test of
/// the parallel suite stopped: a 1,000,000-coroutine child froze the run for 27 s, and a test
/// whose coroutines had finished in 0.2 s was reported at 36 s, past its hang limit. Here the
/// child is started and waited for from a plain thread, and the awaiting test holds no thread.
///
/// How it works: ``run(_:id:body:sourceLocation:)`` starts this test binary again with
/// `--filter` naming the current test and `COROUTINES_CHILD_TEST=<id>` in the environment. In
/// the child, Swift Testing runs that one test; its call to `run` sees its own `id`, runs `body`
/// in the child's process and returns `nil`. Any other call to `run` in the child (another `id`
/// of the same test) returns `nil` without doing anything, so a child never starts a child.
///
/// The child's standard output and error go to files, read after it ended (a pipe could fill
/// up and stall a chatty child).
public enum ChildProcess {
    /// What the child's end must look like.
    public enum Expectation: Sendable {
        /// Exit status 0.
        case success
        /// A non-zero exit status or death by a signal (a trap).
        case failure
    }

    /// How a child process ended, and what it printed.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// The exit status, or `nil` if a signal ended the process.
        public let exitStatus: Int32?
        /// The signal that ended the process, or `nil` if it exited.
        public let signal: Int32?
        /// Everything the child wrote to standard output.
        public let standardOutput: String
        /// Everything the child wrote to standard error: trap messages, and Swift Testing's
        /// report of the test.
        public let standardError: String

        /// True for exit status 0.
        public var succeeded: Bool { exitStatus == 0 }

        public var description: String {
            let end = exitStatus.map { "exit status \($0)" } ?? "signal \(signal ?? -1)"
            return "child ended with \(end)\n--- stderr ---\n\(standardError.suffix(4_000))\n--- stdout ---\n\(standardOutput.suffix(4_000))"
        }
    }

    /// The environment variable naming the part a child process runs.
    public static let variable = "COROUTINES_CHILD_TEST"

    /// The `id` this process was started to run, or `nil` in the test run itself.
    public static var currentID: String? { ProcessInfo.processInfo.environment[variable] }

    /// Runs `body` in a child process and records an issue unless the child ends as `expected`.
    ///
    /// - Parameters:
    ///   - expected: Whether the child must exit with status 0 or fail (non-zero status, signal).
    ///   - id: Names this part among the `run` calls of the same test (unique within the test).
    ///   - environment: Variables set (or replaced) in the child's environment, on top of this
    ///     process's (for settings read once per process, such as `COROUTINES_STALL_MS`).
    ///   - body: Runs in the child only. For `.success`, it must return normally; an `#expect`
    ///     that fails in it makes the child's test fail, and so the child exit with status 1.
    /// - Returns: The child's outcome in the test run; `nil` inside a child process.
    @discardableResult
    public static func run(_ expected: Expectation, id: String, environment: [String: String] = [:],
                           sourceLocation: SourceLocation = #_sourceLocation,
                           body: () async throws -> Void) async -> Outcome? {
        if let current = currentID {
            if current == id {
                do { try await body() } catch {
                    FileHandle.standardError.write(Data("child body threw: \(error)\n".utf8))
                    exit(1)
                }
            }
            return nil
        }
        guard let test = Test.current else {
            Issue.record("ChildProcess.run must be called from a test", sourceLocation: sourceLocation)
            return nil
        }
        let outcome: Outcome
        do {
            outcome = try await spawn(filter: filter(for: test), id: id, environment: environment)
        } catch {
            Issue.record("could not start the child process: \(error)", sourceLocation: sourceLocation)
            return nil
        }
        // A filter that matched nothing would make a child that "succeeds" without running the
        // test: the child's report must show the test started (and, on success, that it ran).
        // (Swift Testing writes that report to standard error when it is not a terminal.)
        let report = outcome.standardError + outcome.standardOutput
        let started = report.contains(" started.")
        let ran = report.range(of: #"Test run with [1-9][0-9]* tests? "#, options: .regularExpression) != nil
        switch expected {
        case _ where !started || (outcome.succeeded && !ran):
            Issue.record("the child process did not run the test (filter \(filter(for: test))): \(outcome)",
                         sourceLocation: sourceLocation)
        case .success where !outcome.succeeded:
            Issue.record("the child process was expected to succeed: \(outcome)", sourceLocation: sourceLocation)
        case .failure where outcome.succeeded:
            Issue.record("the child process was expected to fail: \(outcome)", sourceLocation: sourceLocation)
        default:
            break
        }
        return outcome
    }

    /// A `--filter` regular expression matching `test` and no other: its suite path and name.
    static func filter(for test: Test) -> String {
        // Test.ID reads "Module.Suite/function(labels:)/File.swift:line:column" for a test
        // function; the part before the source location names it uniquely.
        let parts = String(describing: test.id).split(separator: "/")
        let named = parts.prefix { !$0.contains(".swift:") }.joined(separator: "/")
        return "^" + NSRegularExpression.escapedPattern(for: named)
    }

    /// Starts this binary on `filter` with `COROUTINES_CHILD_TEST=id` and `extra` in its
    /// environment, and waits for it to end from a plain thread.
    ///
    /// Started with `posix_spawn`, not `Foundation.Process`: on this toolchain (Swift 6.3.1)
    /// `Process.run()` over-reads a `dirent` while it lists `/proc/self/fd`
    /// (`findMaximumOpenFromProcSelfFD`, swift-corelibs-foundation pull request 5472), and it
    /// crashed the whole parallel test process once (SIGSEGV in `memcpy` inside `Process.run()`).
    /// Like `Process`, the child gets no descriptor of ours but its three standard ones: another
    /// test's socket or pipe kept open in a child would hide its close from the peer.
    static func spawn(filter: String, id: String, environment extra: [String: String] = [:]) async throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coroutines-child-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("stdout").path, err = directory.appendingPathComponent("stderr").path

        var environment = ProcessInfo.processInfo.environment
        environment[variable] = id
        // A child that traps on purpose would start Swift's crash reporter, which symbolicates
        // the whole debug test binary: measured with `perf` over a full `swift test`, the
        // reporters took 46 % of both CPUs (one ran for 90 s of CPU), starving the parallel
        // suite, and the trapping child waits for its reporter before it ends. The tests read
        // the runtime's own message ("Fatal error: …"), printed before the report; set
        // SWIFT_BACKTRACE yourself to see a child's backtrace.
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        environment.merge(extra) { _, new in new }

        let path = executablePath()
        let arguments = [path, "--testing-library", "swift-testing", "--filter", filter]
        let pid = try withCStrings(arguments) { argv in
            try withCStrings(environment.map { "\($0.key)=\($0.value)" }) { envp in
                var actions = posix_spawn_file_actions_t()
                posix_spawn_file_actions_init(&actions)
                defer { posix_spawn_file_actions_destroy(&actions) }
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                try closeOtherDescriptors(&actions)
                var pid = pid_t()
                let status = posix_spawn(&pid, path, &actions, nil, argv, envp)
                guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EINVAL) }
                return pid
            }
        }
        // Waited for on a plain thread: the awaiting test holds no Swift concurrency thread.
        let status: Int32 = await withCheckedContinuation { k in
            Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                k.resume(returning: status)
            }.start()
        }
        let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        // The wait status, decoded as <sys/wait.h>'s WIFEXITED, WEXITSTATUS and WTERMSIG do.
        let signal = status & 0x7f
        return signal == 0
            ? Outcome(exitStatus: (status >> 8) & 0xff, signal: nil, standardOutput: stdout, standardError: stderr)
            : Outcome(exitStatus: nil, signal: signal, standardOutput: stdout, standardError: stderr)
    }

    /// Adds "close every descriptor from 3 up" to `actions`: glibc's
    /// `posix_spawn_file_actions_addclosefrom_np` (2.34 and later; looked up at run time, as
    /// Swift's Glibc module does not declare it); elsewhere, a close of each descriptor open at
    /// this moment (one opened by another thread before the spawn can still slip through).
    private static func closeOtherDescriptors(_ actions: inout posix_spawn_file_actions_t) throws {
        #if os(Linux)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            let closeFrom = unsafeBitCast(symbol, to: CloseFrom.self)
            let status = closeFrom(&actions, 3)
            guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EINVAL) }
            return
        }
        #endif
        let limit = Int32(min(Int(getdtablesize()), 65_536))
        for fd in 3..<limit where fcntl(fd, F_GETFD) >= 0 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
    }

    /// Calls `body` with `strings` as a NULL-terminated array of C strings (argv, envp).
    private static func withCStrings<R>(_ strings: [String],
                                        _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) throws -> R) rethrows -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for p in pointers { free(p) } }
        return try pointers.withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    /// The test binary's path.
    static func executablePath() -> String {
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        #endif
        return CommandLine.arguments[0]
    }
}
