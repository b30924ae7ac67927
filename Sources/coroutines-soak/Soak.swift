@_spi(Diagnostics) import Coroutines
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Prints a line at once (stdout may be a pipe).
func say(_ line: String) {
    let text = line + "\n"
    text.withCString { _ = write(1, $0, strlen($0)) }
}

/// The soak run: a warm-up round, a snapshot, rounds until the time is up, a snapshot, the
/// verdict.
struct Soak {
    /// The default length: long enough for at least `minimumOperations` on the project's 2-core
    /// machine, with room to spare (the figures are in docs/Performance.md).
    static let defaultSeconds = 30
    /// Channel operations the default length must reach.
    static let minimumOperations = 10_000_000
    /// Resident memory may grow this much between the start (after the warm-up round) and the
    /// end: glibc's malloc keeps freed memory in each thread's arena for reuse instead of
    /// returning it, and the stack allocator keeps up to 256 idle stacks of a size resident (and
    /// each scheduler up to 128 in its cache), so the peak of a busier round stays resident. A
    /// leak of a few hundred bytes per round is out of reach of this figure: the counts of
    /// stacks, timers and coroutines and the freed-objects check are what catch those.
    static let residentSlack = 16 << 20
    static let schedulerCount = 4
    /// A round that takes this long has hung: `dumpAll()` is printed and the soak fails.
    static let hangLimit: DispatchTimeInterval = .seconds(120)

    let seconds: Int
    let isDefaultLength: Bool
    let seed: UInt64

    /// Totals over the rounds.
    struct Totals {
        var rounds = 0, operations = 0, delivered = 0, received = 0
        var lost = 0, duplicated = 0, phantom = 0, leftOver = 0, unexpected = 0
        var failures: [String] = []
        var isClean: Bool { lost == 0 && duplicated == 0 && phantom == 0 && leftOver == 0 && unexpected == 0 }
    }

    /// What the process and the runtime hold, read once every scheduler of the pool has gone
    /// round its loop (``RuntimeResources/blockingSettled(_:)``).
    struct Snapshot: CustomStringConvertible {
        let rss: Int, fds: Int, runtime: RuntimeResources
        static func take(_ pool: SchedulerPool) -> Snapshot {
            let runtime = RuntimeResources.blockingSettled(pool.schedulers)
            return Snapshot(rss: ProcessStatus.residentBytes(), fds: ProcessStatus.openDescriptors(), runtime: runtime)
        }
        var description: String { "RSS \(mebibytes(rss)) MiB, fds \(fds), \(runtime)" }
    }

    /// A weak reference to a channel or coroutine of an observed round.
    final class WeakBox { weak var object: AnyObject?; init(_ o: AnyObject) { object = o } }

    /// Runs the soak and returns the exit status.
    func run() throws -> Int32 {
        say("soak: \(seconds) s\(isDefaultLength ? " (default)" : ""), \(Self.schedulerCount) schedulers, "
            + "seed \(seed) (SOAK_SEED=\(seed) repeats the rounds' plans, not their timing)")
        guard let pool = SchedulerPool(name: "soak", count: Self.schedulerCount) else { fatalError("no pool") }
        let progress = startHangDetector()
        var totals = Totals()
        var observed: [WeakBox] = []
        func round(_ number: Int) throws {
            try runRound(number, pool, &totals) { objects in
                if number % 16 == 0 { observed += objects.map(WeakBox.init) }
            }
            progress.signal()
        }

        // Warm-up: one round, so that the pool's threads, arenas and stack caches exist at the start.
        try Coroutine.runBlocking { try round(0) }
        let start = Snapshot.take(pool)
        say("start (after a warm-up round): \(start)")
        let begin = DispatchTime.now().uptimeNanoseconds
        let deadline = begin + UInt64(seconds) * 1_000_000_000
        try Coroutine.runBlocking {
            var number = 1
            while DispatchTime.now().uptimeNanoseconds < deadline && totals.isClean {
                try round(number)
                number += 1
            }
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e9
        let end = Snapshot.take(pool)
        say("end: \(end)")
        let unfreed = observed.filter { $0.object != nil }.count
        say("rounds \(totals.rounds), channel operations \(totals.operations) in \(tenths(elapsed)) s "
            + "(\(Int(Double(totals.operations) / elapsed)) per s); values delivered \(totals.delivered), received \(totals.received)")
        let e = SoakEvents.shared
        say("races: \(e.closes.load(ordering: .relaxed)) channels closed and \(e.cancels.load(ordering: .relaxed)) coroutines cancelled "
            + "during traffic; sends that threw closed \(e.sendsClosed.load(ordering: .relaxed)), cancelled \(e.sendsCancelled.load(ordering: .relaxed)); "
            + "consumers cancelled \(e.receivesCancelled.load(ordering: .relaxed)); select timeouts \(e.selectTimeouts.load(ordering: .relaxed)); "
            + "schedulers that ran soak coroutines: \(e.schedulersUsed.load(ordering: .relaxed).nonzeroBitCount) of \(Self.schedulerCount)")
        say("lost \(totals.lost), duplicated \(totals.duplicated), phantom \(totals.phantom), left over \(totals.leftOver), unexpected errors \(totals.unexpected); "
            + "channels and coroutines of \(observed.count) observed, not freed: \(unfreed)")
        return verdict(totals, start, end, unfreed: unfreed)
    }

    /// Runs one round, checks it and adds it to `totals`.
    func runRound(_ number: Int, _ pool: SchedulerPool, _ totals: inout Totals,
                  observe: ([AnyObject]) -> Void) throws {
        var rng = SplitMix(state: seed &+ UInt64(number) &* 0x2545_F491_4F6C_DD1D)
        _ = rng.next()
        let (ledger, operations) = try SoakRound(number: number, pool: pool, rng: rng).run(observe: observe)
        let verdict = ledger.check()
        let unexpected = ledger.unexpectedErrors
        totals.rounds += 1
        totals.operations += operations
        totals.delivered += verdict.delivered
        totals.received += verdict.received
        totals.lost += verdict.lost
        totals.duplicated += verdict.duplicated
        totals.phantom += verdict.phantom
        totals.leftOver += verdict.leftOver
        totals.unexpected += unexpected.count
        if !verdict.isClean || !unexpected.isEmpty {
            totals.failures += ["round \(number): lost \(verdict.lost), duplicated \(verdict.duplicated), phantom \(verdict.phantom), left over \(verdict.leftOver)"]
                + verdict.samples + unexpected.prefix(10)
        }
    }

    /// Prints what failed, if anything, and returns the exit status.
    func verdict(_ totals: Totals, _ start: Snapshot, _ end: Snapshot, unfreed: Int) -> Int32 {
        var problems = totals.failures
        if end.fds != start.fds { problems.append("descriptors: \(start.fds) at the start, \(end.fds) at the end") }
        if end.runtime != start.runtime { problems.append("runtime: \(start.runtime) at the start, \(end.runtime) at the end") }
        let grown = end.rss - start.rss
        if grown > Self.residentSlack {
            problems.append("resident memory grew by \(mebibytes(grown)) MiB (slack \(Self.residentSlack >> 20) MiB)")
        }
        if unfreed > 0 { problems.append("\(unfreed) channels or coroutines of observed rounds were not freed") }
        if isDefaultLength && totals.operations < Self.minimumOperations {
            problems.append("only \(totals.operations) channel operations at the default length (at least \(Self.minimumOperations))")
        }
        if problems.isEmpty {
            say("soak: PASS (resident memory \(grown >= 0 ? "+" : "")\(mebibytes(grown)) MiB, slack \(Self.residentSlack >> 20) MiB)")
            return 0
        }
        for p in problems { say("soak: FAIL: \(p)") }
        return 1
    }

    /// A hang detector, not a clock for the soak: each round signals, and a round that takes
    /// more than `hangLimit` ends the run with what every coroutine was waiting on.
    func startHangDetector() -> DispatchSemaphore {
        let progress = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            while true {
                if progress.wait(timeout: .now() + Self.hangLimit) == .timedOut {
                    say("soak: FAIL: no round finished in \(Self.hangLimit); live coroutines:\n\(Coroutine.dumpAll())")
                    exit(3)
                }
            }
        }
        return progress
    }
}

func mebibytes(_ bytes: Int) -> String { tenths(Double(bytes) / 1_048_576) }

func tenths(_ x: Double) -> String {
    let t = Int((x * 10).rounded())
    return "\(t < 0 ? "-" : "")\(abs(t) / 10).\(abs(t) % 10)"
}
