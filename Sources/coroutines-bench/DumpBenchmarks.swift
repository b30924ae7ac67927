import Coroutines
import Foundation
import Synchronization

// MARK: launch-during-dump — launches onto a scheduler while dumpAll() walks its registry

/// Suspended coroutines the dump walks.
let dumpedCoroutines = 1_000_000
/// The pace of the launching thread: one launch per 5 µs.
let launchInterval: UInt64 = 5_000

/// Parks `count` coroutines on a new dedicated scheduler (each awaits `gate`), then returns
/// the scheduler once all are suspended.
func parkOnDedicatedScheduler(_ count: Int, gate: Promise<Void>) throws -> CoroutineScheduler {
    let s = CoroutineScheduler(name: "dumped")
    final class Counter: @unchecked Sendable { var value = 0 }   // confined to `s`
    let counter = Counter()
    let parked = Promise<Void>()
    for _ in 0..<count {
        Coroutine.launch(on: s) {
            counter.value += 1
            if counter.value == count { parked.fulfill(()) }
            try gate.await()
        }
    }
    try blockingAwait { try await parked.value }
    return s
}

/// The worst latency, in µs, of `Coroutine.launch(on:)` onto a scheduler with `count` suspended
/// coroutines, called from this thread in a loop: while another thread runs
/// `Coroutine.dumpAll()` (`duringDump`), or as many launches with no dump (the baseline). The
/// median launch latency and the dump's duration are recorded as second figures.
func worstLaunchLatency(count: Int, duringDump: Bool) throws -> Double {
    let gate = Promise<Void>()
    let s = try parkOnDedicatedScheduler(count, gate: gate)
    defer {
        gate.fulfill(())
        s.stop()
    }
    final class Dump: Sendable {
        let done = Atomic<Bool>(false)
        let nanoseconds = Atomic<UInt64>(0)
        let started = Promise<Void>()
        let startedAt = Atomic<UInt64>(0)
    }
    let dump = Dump()
    if duringDump {
        let dumper = Thread {
            let t0 = now()
            dump.startedAt.store(t0, ordering: .relaxed)
            dump.started.fulfill(())
            let report = Coroutine.dumpAll()
            dump.nanoseconds.store(now() - t0, ordering: .relaxed)
            precondition(report.utf8.count > count, "the dump lists the parked coroutines")
            dump.done.store(true, ordering: .releasing)
        }
        dumper.start()
        try blockingAwait { try await dump.started.value }
    }
    // One launch every `launchInterval` (a steady stream the scheduler keeps up with: an
    // unpaced loop would pile up millions of unstarted coroutines and measure page faults).
    // Written before the clock starts: a page fault of its own would be measured too.
    var slots = [UInt64](repeating: 0, count: 1 << 22)
    var taken = 0
    var next = now()
    // During a dump: until it ends. Without: 200,000 launches (more than a dump lasts).
    while duringDump ? !dump.done.load(ordering: .acquiring) : taken < 200_000 {
        precondition(taken < slots.count, "more launches than slots")
        while now() < next {}
        next += launchInterval
        let t0 = now()
        Coroutine.launch(on: s) {}
        let t1 = now()
        slots[taken] = t1 - t0
        taken += 1
        if t1 - t0 > 1_000_000, ProcessInfo.processInfo.environment["DUMP_DEBUG"] != nil { emit("    slow launch at +\((t0 - dump.startedAt.load(ordering: .relaxed)) / 1_000_000) ms: \((t1 - t0) / 1_000) µs") }
    }
    var latencies = Array(slots[0..<taken])
    latencies.sort()
    let label = duringDump ? "launch during dumpAll (worst)" : "launch, no dump (worst)"
    recordSecondary(label, Double(latencies[latencies.count / 2]) / 1_000, unit: "µs median")
    if duringDump { emit("    dumpAll of \(count) coroutines took \(dump.nanoseconds.load(ordering: .relaxed) / 1_000_000) ms; \(taken) launches meanwhile") }
    return Double(latencies.last!) / 1_000
}

func dumpBenchmarks() -> [Benchmark] { [
    Benchmark(name: "launch-during-dump",
              ours: Workload(name: "launch during dumpAll (worst)", unit: "µs", runs: 3) { try worstLaunchLatency(count: dumpedCoroutines, duringDump: true) },
              peers: [Workload(name: "launch, no dump (worst)", unit: "µs", runs: 3) { try worstLaunchLatency(count: dumpedCoroutines, duringDump: false) }],
              isolated: true),
] }
