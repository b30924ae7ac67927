import Coroutines
import Foundation
import Synchronization

// MARK: launch-during-dump — launches onto a scheduler while dumpAll() walks its registry

/// Suspended coroutines the dump walks.
let dumpedCoroutines = 1_000_000
/// The pace of the launching thread: a sleep of 20 µs between launches (about 70 µs with the
/// kernel's timer slack).
let launchIntervalMicroseconds: UInt32 = 20

/// Parks `count` coroutines on a new dedicated scheduler (each awaits `gate`), then returns
/// the scheduler once all are suspended, and a promise fulfilled once all have finished after
/// the gate opened.
func parkOnDedicatedScheduler(_ count: Int, gate: Promise<Void>) throws -> (CoroutineScheduler, finished: Promise<Void>) {
    let s = CoroutineScheduler(name: "dumped")
    final class Counter: @unchecked Sendable { var parked = 0; var finished = 0 }   // confined to `s`
    let counter = Counter()
    let parked = Promise<Void>()
    let finished = Promise<Void>()
    for _ in 0..<count {
        Coroutine.launch(on: s) {
            counter.parked += 1
            if counter.parked == count { parked.fulfill(()) }
            try gate.await()
            counter.finished += 1
            if counter.finished == count { finished.fulfill(()) }
        }
    }
    try blockingAwait { try await parked.value }
    return (s, finished)
}

/// What runs on another thread while launches are timed.
enum LaunchBackground {
    /// `Coroutine.dumpAll()` over the parked coroutines.
    case dump
    /// The same amount of report text built without the runtime: the machine's own noise with
    /// one more busy thread (a scheduler tick of preemption shows up as a few ms here).
    case control
    /// Nothing: 30,000 launches.
    case none
}

/// The worst latency, in µs, of `Coroutine.launch(on:)` onto a scheduler with `count` suspended
/// coroutines, called from this thread in a paced loop while `background` runs on another
/// thread. The median launch latency is recorded as a second figure.
func worstLaunchLatency(count: Int, background: LaunchBackground) throws -> Double {
    let duringDump = background != .none
    let gate = Promise<Void>()
    let (s, finished) = try parkOnDedicatedScheduler(count, gate: gate)
    defer {
        // Waits until the parked coroutines have finished: a million coroutines unwinding on
        // their scheduler's thread take seconds of CPU, and `stop()` returns at once. Left to
        // run on, they kept one of two CPUs busy during the next run's timed loop, and launches
        // waited milliseconds for a CPU (seen with `perf sched timehist`).
        gate.fulfill(())
        precondition((try? blockingAwait { try await finished.value }) != nil, "the parked coroutines finish")
        s.stop()
    }
    final class Dump: Sendable {
        let done = Atomic<Bool>(false)
        let nanoseconds = Atomic<UInt64>(0)
        let started = Promise<Void>()
    }
    let dump = Dump()
    if duringDump {
        let dumper = Thread {
            let t0 = now()
            dump.started.fulfill(())
            let report = background == .control
                ? (0..<count).map { "unnamed on dumped: suspended waiting in \($0)" }.joined(separator: "\n")
                : Coroutine.dumpAll()
            dump.nanoseconds.store(now() - t0, ordering: .relaxed)
            precondition(report.utf8.count > count, "the dump lists the parked coroutines")
            dump.done.store(true, ordering: .releasing)
        }
        dumper.start()
        try blockingAwait { try await dump.started.value }
    }
    // A paced stream of launches (the scheduler keeps up with it: an unpaced loop would pile up
    // millions of unstarted coroutines and measure page faults).
    // Written before the clock starts: a page fault of its own would be measured too.
    var slots = [UInt64](repeating: 0, count: 1 << 22)
    var taken = 0
    // During a dump: until it ends. Without: 30,000 launches (about as many as during a dump).
    while duringDump ? !dump.done.load(ordering: .acquiring) : taken < 30_000 {
        precondition(taken < slots.count, "more launches than slots")
        // Sleeping, not spinning: a thread that spins for its whole time slice is preempted
        // for a scheduler tick (4 ms here) at some point, which would be measured too.
        usleep(launchIntervalMicroseconds)
        let t0 = now()
        Coroutine.launch(on: s) {}
        let t1 = now()
        slots[taken] = t1 - t0
        taken += 1
    }
    var latencies = Array(slots[0..<taken])
    latencies.sort()
    let label = switch background {
    case .dump: "launch during dumpAll (worst)"
    case .control: "launch during a control thread (worst)"
    case .none: "launch, no dump (worst)"
    }
    recordSecondary(label, Double(latencies[latencies.count / 2]) / 1_000, unit: "µs median")
    if background == .dump { emit("    dumpAll of \(count) coroutines took \(dump.nanoseconds.load(ordering: .relaxed) / 1_000_000) ms; \(taken) launches meanwhile") }
    return Double(latencies.last!) / 1_000
}

func dumpBenchmarks() -> [Benchmark] { [
    Benchmark(name: "launch-during-dump",
              ours: Workload(name: "launch during dumpAll (worst)", unit: "µs", runs: 5) { try worstLaunchLatency(count: dumpedCoroutines, background: .dump) },
              peers: [Workload(name: "launch during a control thread (worst)", unit: "µs", runs: 5) { try worstLaunchLatency(count: dumpedCoroutines, background: .control) },
                      Workload(name: "launch, no dump (worst)", unit: "µs", runs: 5) { try worstLaunchLatency(count: dumpedCoroutines, background: .none) }],
              isolated: true),
] }
