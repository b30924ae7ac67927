import CCoroutines
import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One measured workload: `run()` returns the metric of one run (e.g. ns per operation).
struct Workload {
    let name: String
    let unit: String
    let runs: Int
    /// Why the workload cannot run in this process (then its row says so instead of a figure).
    var skipReason: String? = nil
    /// A floor rather than a peer: no code of anyone's, the hardware alone (its row is compared
    /// as "N× the floor" instead of a ratio in favour of either side).
    var isFloor = false
    let run: () throws -> Double
}

/// A benchmark: our workload and the Swift-concurrency peer measured in the same process.
struct Benchmark {
    let name: String
    let ours: Workload
    /// The Swift-concurrency peers, each reported with its own ratio.
    let peers: [Workload]
    /// true: smaller is better (time); false: larger is better (throughput).
    var smallerIsBetter = true
    /// Whether each workload is measured in a child process of its own (`--workload`), so that
    /// what one leaves in the heap and the stack caches cannot change the next one's figures.
    var isolated = false
}

/// Measures workload `index` of `benchmark` (0: ours, then its peers): here, or in a child
/// process running `--workload <name> <index>` if the benchmark is isolated.
func measure(_ benchmark: Benchmark, workload index: Int) throws -> Summary {
    let w = index == 0 ? benchmark.ours : benchmark.peers[index - 1]
    guard benchmark.isolated else { return try measure(w) }
    let (status, text) = try runSelf(["--workload", benchmark.name, String(index)])
    let fields = (text.split(separator: "\n").last ?? "").split(separator: " ").compactMap { Double($0) }
    guard status == 0, fields.count == 4 else {
        throw BenchError.child("workload \(w.name) exited \(status): \(text)")
    }
    return Summary(median: fields[0], min: fields[1], max: fields[2], n: Int(fields[3]))
}

/// Runs this executable again with `arguments`; returns its exit status and its standard
/// output, trimmed.
func runSelf(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
}

/// The child side of an isolated measurement: prints `median min max n`.
func runWorkloadChild(_ benchmark: Benchmark, _ index: Int) throws {
    let s = try measure(index == 0 ? benchmark.ours : benchmark.peers[index - 1])
    emit("\(s.median) \(s.min) \(s.max) \(s.n)")
}

struct Summary {
    let median: Double
    let min: Double
    let max: Double
    let n: Int
}

func measure(_ w: Workload) throws -> Summary {
    let warmUp = try w.run()
    var values: [Double] = []
    for _ in 0..<w.runs { values.append(try w.run()) }
    if getenv("COROUTINES_BENCH_VERBOSE") != nil {
        emit("  \(w.name): warm-up \(format(warmUp)), runs \(values.map(format).joined(separator: " "))")
    }
    values.sort()
    let median = values.count % 2 == 1 ? values[values.count / 2] : (values[values.count / 2 - 1] + values[values.count / 2]) / 2
    return Summary(median: median, min: values.first!, max: values.last!, n: values.count)
}

func format(_ v: Double) -> String {
    guard v.isFinite else { return v.isNaN ? "nan" : (v > 0 ? "inf" : "-inf") }
    if v < 0 { return "-" + format(-v) }
    if v >= 100 { return String(Int(v.rounded())) }
    if v >= 10 { return String(Double(Int(v * 10)) / 10) }
    return String(Double(Int(v * 100)) / 100)
}

func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }

/// Prints a line at once (stdout may be a pipe; the figures must not sit in a buffer).
func emit(_ line: String) {
    let text = line + "\n"
    text.withCString { _ = write(1, $0, strlen($0)) }
}

func report(_ name: String, _ s: Summary, _ unit: String) {
    emit("\(pad(name, 28)) n=\(s.n)  median=\(format(s.median)) \(unit)  (\(format(s.min))…\(format(s.max)))")
}

/// Monotonic nanoseconds.
@inline(__always) func now() -> UInt64 { ccoro_now_ns() }

/// Runs async work from synchronous code and waits for it (the main thread is not a
/// cooperative-pool thread, so blocking it is fine here).
func blockingAwait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<T>()
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// Resident set size in bytes (Linux /proc/self/statm: size resident shared …, in pages).
func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 256)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { return 0 }
    let fields = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(ccoro_page_size())
}

/// Runs one `parked` measurement in a fresh child process and returns its figure.
func parkedInChild(_ kind: String, _ count: Int) throws -> Double {
    let (status, text) = try runSelf(["--parked-child", kind, String(count)])
    guard status == 0, let value = Double(text.split(separator: "\n").last ?? "") else {
        throw BenchError.child("parked child (\(kind), \(count)) exited \(status): \(text)")
    }
    return value
}

enum BenchError: Error {
    case child(String)
}

/// Second figures of a workload (the echo benchmark's p99 latency), one per run, by workload name.
/// Written and read only by the main thread, between runs.
nonisolated(unsafe) var secondaryFigures: [String: (unit: String, values: [Double])] = [:]

func recordSecondary(_ workload: String, _ value: Double, unit: String) {
    secondaryFigures[workload, default: (unit, [])].values.append(value)
}

/// Prints the median and range of a workload's second figure, if it has one (warm-up excluded).
func reportSecondary(_ workload: String) {
    guard var entry = secondaryFigures[workload], entry.values.count > 1 else { return }
    entry.values.removeFirst()   // the warm-up run
    entry.values.sort()
    let median = entry.values[entry.values.count / 2]
    emit("\(pad("", 28)) median=\(format(median)) \(entry.unit)  (\(format(entry.values.first!))…\(format(entry.values.last!)))")
    secondaryFigures[workload] = nil
}

/// How many CPUs this process may run on: its affinity mask (`taskset`), which Foundation's
/// `activeProcessorCount` does not read on Linux. As QueuePool's `activeProcessorCount()` does it
/// (`sched_getaffinity` is looked up at run time: the Glibc module does not declare it).
func processorsAvailable() -> Int {
    #if canImport(Glibc)
    typealias SchedGetAffinity = @convention(c) (pid_t, Int, UnsafeMutablePointer<cpu_set_t>) -> Int32
    if let libc = dlopen(nil, RTLD_NOW) {
        defer { dlclose(libc) }
        if let symbol = dlsym(libc, "sched_getaffinity") {
            var mask = cpu_set_t()
            if unsafeBitCast(symbol, to: SchedGetAffinity.self)(0, MemoryLayout<cpu_set_t>.size, &mask) == 0 {
                let count = withUnsafeBytes(of: &mask) { $0.reduce(0) { $0 + $1.nonzeroBitCount } }
                if count > 0 { return count }
            }
        }
    }
    #endif
    return ProcessInfo.processInfo.activeProcessorCount
}

/// Starts a thread that waits forever, before anything is measured, so that every workload —
/// ours, the peers', the baseline build's in `Scripts/ab.sh` — runs in a process with more than
/// one thread. glibc's `malloc` and `free` skip their arena lock only while a process has a
/// single thread: a state that no program using the runtime is in (the stall monitor, pool
/// schedulers, Dispatch and Swift concurrency all start threads), and that flattered whichever
/// build happened to start none (measured: `spawn` 13 % faster in a one-thread process).
func startIdleThread() {
    let thread = Thread { while true { sleep(3_600) } }
    thread.name = "bench-idle"
    thread.start()
}
