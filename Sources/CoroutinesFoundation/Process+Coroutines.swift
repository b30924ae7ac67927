import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a process run by `Process.runUntilExit()` left behind.
public struct ProcessOutput: Sendable, Equatable {
    /// The exit status, or the number of the signal that ended the process (see
    /// ``terminationReason``).
    public var terminationStatus: Int32
    /// Whether the process exited or was ended by a signal.
    public var terminationReason: Process.TerminationReason
    /// Everything the process wrote to its standard output.
    public var standardOutput: Data
    /// Everything the process wrote to its standard error.
    public var standardError: Data

    /// ``standardOutput`` decoded as UTF-8 (invalid bytes repaired).
    public var standardOutputText: String { String(decoding: standardOutput, as: UTF8.self) }
    /// ``standardError`` decoded as UTF-8 (invalid bytes repaired).
    public var standardErrorText: String { String(decoding: standardError, as: UTF8.self) }
}

extension Process {
    /// Runs the process, captures its standard output and standard error, and suspends the
    /// calling coroutine until it has exited and both streams have ended.
    ///
    /// ```swift
    /// let process = Process()
    /// process.executableURL = URL(fileURLWithPath: "/bin/sh")
    /// process.arguments = ["-c", "echo out; echo err >&2; exit 3"]
    /// let output = try process.runUntilExit()   // status 3, "out\n", "err\n"
    /// ```
    ///
    /// Configure the process (executable, arguments, environment, directory, standard input)
    /// first; this method replaces `standardOutput` and `standardError` with pipes and sets
    /// `terminationHandler`. No thread is held while waiting: the pipes are read in the calling
    /// coroutine (standard error in a child coroutine) as the scheduler's poller reports them
    /// readable, and the exit arrives through `terminationHandler`. The child starts with no
    /// signal blocked, whatever the scheduler thread's own signal mask.
    ///
    /// ## Cancellation
    /// Cancelling the coroutine (or an expiring `withTimeout`) sends `SIGTERM` to the process
    /// (`terminate()`) and throws `CancellationError` (or `CoroutineError.timedOut`).
    ///
    /// - Returns: The exit status, termination reason and captured output.
    /// - Throws: What `run()` throws (a missing executable, …); `CancellationError`;
    ///   `CoroutineError.timedOut`; `CoroutineError.notInCoroutine` outside a coroutine, and
    ///   `CoroutineError.forkedProcess` in a child made by `fork()` (the process is then not
    ///   started).
    ///
    /// ## Spawning, not forking
    /// Foundation starts the process with `posix_spawn`, which runs no `pthread_atfork` handler
    /// (glibc runs them for `fork()` only): the runtime's fork handler (see
    /// `CoroutineError.forkedProcess`) never runs for it, and the calling process's
    /// coroutines and schedulers go on as before.
    ///
    /// ## A known fault of Foundation on Linux
    /// This method starts the process with Foundation's `Process.run()`. On the Swift 6.3.1
    /// toolchain, `run()` reads past a directory entry while it lists `/proc/self/fd`, and can
    /// crash the calling process (`SIGSEGV` in `memcpy`); swift-corelibs-foundation pull request
    /// 5472 fixes it. The crash is rare, but a process that starts many children on such a
    /// toolchain meets it sooner or later. This package's own tests start their children with
    /// `posix_spawn` for that reason.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(output size).
    public func runUntilExit() throws -> ProcessOutput {
        // In a forked child nothing could read the pipes (<doc:BlockingAndStopping>): nothing is
        // started there.
        guard Coroutine.current != nil, !ForkGuard.isForkedChild else { throw CoroutineError.outsideCoroutine }
        let out = Pipe(), err = Pipe()
        standardOutput = out
        standardError = err
        let exited = Promise<ExitInfo>()
        terminationHandler = { p in
            exited.fulfill(ExitInfo(status: p.terminationStatus, reason: p.terminationReason))
        }
        try Self.withSignalsUnblocked { try run() }
        let outFD = out.fileHandleForReading.fileDescriptor
        let errFD = err.fileHandleForReading.fileDescriptor
        // The pipes' write ends must close in this process too, or the reads never see the end.
        try? out.fileHandleForWriting.close()
        try? err.fileHandleForWriting.close()
        // The child coroutine keeps the stderr pipe (and so its descriptor) alive until it ends,
        // even if this coroutine leaves early.
        let errors = Coroutine.async { [err] in try withExtendedLifetime(err) { try Self.readToEnd(errFD) } }
        do {
            let standardOutput = try Self.readToEnd(outFD)
            let standardError = try errors.await()
            let info = try exited.await()
            withExtendedLifetime(out) {}
            return ProcessOutput(terminationStatus: info.status, terminationReason: info.reason,
                                 standardOutput: standardOutput, standardError: standardError)
        } catch {
            errors.cancel()
            if isRunning { terminate() }
            throw error
        }
    }

    /// Runs an executable with arguments, captures its output, and suspends the calling
    /// coroutine until it has exited: a new `Process` configured and passed to
    /// ``runUntilExit()``.
    ///
    /// ```swift
    /// let output = try Process.runUntilExit(URL(fileURLWithPath: "/bin/ls"), arguments: ["-l"])
    /// ```
    ///
    /// - Parameters:
    ///   - executableURL: The program to run.
    ///   - arguments: Its arguments.
    ///   - currentDirectoryURL: Its working directory; nil inherits this process's.
    /// - Returns: The exit status, termination reason and captured output.
    /// - Throws: As ``runUntilExit()``.
    /// - Suspends: yes; resumes on the coroutine's own scheduler.
    /// - Complexity: O(output size).
    public static func runUntilExit(_ executableURL: URL, arguments: [String] = [],
                                    currentDirectoryURL: URL? = nil) throws -> ProcessOutput {
        let process = Process()
        process.executableURL = executableURL
        process.arguments = arguments
        if let currentDirectoryURL { process.currentDirectoryURL = currentDirectoryURL }
        return try process.runUntilExit()
    }

    /// Runs `body` with no signal blocked on the calling thread, then restores its mask.
    ///
    /// A child process inherits the signal mask of the thread that spawns it, and Foundation's
    /// `Process` does not reset it. Threads started from libdispatch workers (a Swift-concurrency
    /// thread, say) block nearly every signal, and so would the child — `terminate()` (SIGTERM)
    /// and Ctrl-C would not reach it. The window is the duration of `run()`; a signal pending
    /// for this thread is delivered in it, as it would be on a thread that never blocked it.
    private static func withSignalsUnblocked<T>(_ body: () throws -> T) rethrows -> T {
        var none = sigset_t(), saved = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        return try body()
    }

    /// Reads a pipe until its end, suspending while it is empty.
    private static func readToEnd(_ fd: Int32) throws -> Data {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                data.append(contentsOf: buffer[0..<n])
            } else if n == 0 {
                return data
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                try Coroutine.waitUntilReadable(fd)
            } else if errno != EINTR {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }
    }
}

/// How a process ended, as its termination handler saw it.
private struct ExitInfo: Sendable {
    var status: Int32
    var reason: Process.TerminationReason
}
