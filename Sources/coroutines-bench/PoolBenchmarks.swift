import CCoroutines
import Coroutines
import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#endif

// Left out of `Scripts/ab.sh` builds (`AB_COMPARISON`): both sides of an A/B build the same
// benchmark sources, and commits before pool launches existed cannot build these.
#if !AB_COMPARISON

// The pool benchmarks run unpinned: they measure how work spreads over the CPUs. Each workload
// runs in a child process of its own (`Benchmark.isolated`), so that the heap and stack caches
// one leaves behind do not change the next one's figures.

// MARK: skynet-pool — skynet with the root on the default pool, children without `on:`

/// The skynet recursion, launched onto the default pool: every `Coroutine.async` inside it is a
/// pool launch. The clock stops when the root's promise is fulfilled (every coroutine has
/// returned its sum), as `skynet`'s does when runBlocking returns.
func coroutineSkynetPool() throws -> Double {
    let pool = SchedulerPool.default(for: .default)
    let t0 = now()
    let sum = try Coroutine.runBlocking {
        try Coroutine.async(on: pool) { try skynetNode(0, 1_000_000, 10) }.await()
    }
    let t1 = now()
    precondition(sum == 499_999_500_000, "skynet sum \(sum)")
    return Double(t1 - t0) / 1e6
}

// MARK: skew — 10,000 CPU-bound children, every 8th costing 10× the others

/// CPU work that the optimiser cannot remove: `n` steps of xorshift64 from a seed known only
/// at run time (a linear generator, or a constant seed, was folded away at compile time).
@inline(never)
func spinWork(_ n: Int, seed: Int) -> UInt64 {
    var x = UInt64(truncatingIfNeeded: seed) | 1
    for _ in 0..<n { x ^= x << 13; x ^= x >> 7; x ^= x << 17 }
    return x
}

/// `spinWork` steps of an ordinary child: about 47 µs on the AMD EPYC machine (500 steps per
/// µs), so that with every 8th child costing 10× as much the mean is about 100 µs
/// (7 × 47 + 470 = 8 × 100). A fixed amount of work, not a calibrated time: every run and every
/// peer does the same work.
let skewUnitSteps = 23_500

/// The cost of child `i` in `spinWork` steps.
func skewSteps(_ i: Int) -> Int { i % 8 == 7 ? skewUnitSteps * 10 : skewUnitSteps }

let skewChildren = 10_000

/// One coroutine launches the children without `on:` and awaits them all. `pool`: the root is
/// a pool launch onto the default pool (its children are pool launches); nil: everything on
/// runBlocking's one scheduler.
func coroutineSkew(onPool: Bool) throws -> Double {
    let t0 = now()
    let body: @Sendable () throws -> UInt64 = {
        let children = (0..<skewChildren).map { i in Coroutine.async { spinWork(skewSteps(i), seed: i) } }
        return try children.reduce(0) { $0 &+ (try $1.await()) }
    }
    let result = try Coroutine.runBlocking {
        onPool ? try Coroutine.async(on: SchedulerPool.default(for: .default), body).await() : try body()
    }
    precondition(result != 0)
    return Double(now() - t0) / 1e6
}

/// Swift peer: the same children as tasks of one `TaskGroup`.
func taskSkew() throws -> Double {
    let t0 = now()
    let result = try blockingAwait {
        await withTaskGroup(of: UInt64.self) { group in
            for i in 0..<skewChildren { group.addTask { spinWork(skewSteps(i), seed: i) } }
            var sum: UInt64 = 0
            for await v in group { sum &+= v }
            return sum
        }
    }
    precondition(result != 0)
    return Double(now() - t0) / 1e6
}

// MARK: idle — CPU used by an idle process after a pool fan-out, and with a launch per ms

/// CPU time (user + system) of the whole process, in nanoseconds.
func processCPUNanoseconds() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = UInt64(usage.ru_utime.tv_sec) * 1_000_000_000 + UInt64(usage.ru_utime.tv_usec) * 1_000
    let system = UInt64(usage.ru_stime.tv_sec) * 1_000_000_000 + UInt64(usage.ru_stime.tv_usec) * 1_000
    return user + system
}

/// Percent of one CPU the process uses over 2 s, starting 10 ms after a `skynet-pool` run.
func idleAfterSkynetPool() throws -> Double {
    _ = try coroutineSkynetPool()
    usleep(10_000)
    let (c0, t0) = (processCPUNanoseconds(), now())
    usleep(2_000_000)
    let (c1, t1) = (processCPUNanoseconds(), now())
    return Double(c1 - c0) / Double(t1 - t0) * 100
}

/// Percent of one CPU the process uses over 2 s while a plain thread makes one pool launch (of
/// an empty coroutine) per millisecond.
func idleWithLaunchPerMillisecond() throws -> Double {
    let pool = SchedulerPool.default(for: .default)
    _ = try Coroutine.runBlocking { try Coroutine.async(on: pool) {}.await() }
    let (c0, t0) = (processCPUNanoseconds(), now())
    var last: Promise<Void>?
    while now() - t0 < 2_000_000_000 {
        last = Coroutine.async(on: pool) {}
        usleep(1_000)
    }
    let (c1, t1) = (processCPUNanoseconds(), now())
    _ = try Coroutine.runBlocking { try last?.await() }
    return Double(c1 - c0) / Double(t1 - t0) * 100
}

/// The pool benchmarks, registered after the others in `main.swift`.
func poolBenchmarks() -> [Benchmark] { [
    Benchmark(name: "skynet-pool",
              ours: Workload(name: "skynet-pool (default pool)", unit: "ms", runs: 5) { try coroutineSkynetPool() },
              peers: [Workload(name: "skynet (one scheduler)", unit: "ms", runs: 5) { try coroutineSkynet() },
                      Workload(name: "swift: TaskGroup", unit: "ms", runs: 3) { try taskSkynet() }],
              isolated: true),
    Benchmark(name: "skew",
              ours: Workload(name: "skew (default pool)", unit: "ms", runs: 5) { try coroutineSkew(onPool: true) },
              peers: [Workload(name: "skew (one scheduler)", unit: "ms", runs: 5) { try coroutineSkew(onPool: false) },
                      Workload(name: "swift: TaskGroup", unit: "ms", runs: 5) { try taskSkew() }],
              isolated: true),
    Benchmark(name: "idle",
              ours: Workload(name: "idle after skynet-pool", unit: "% of a CPU", runs: 1) { try idleAfterSkynetPool() },
              peers: [], isolated: true),
    Benchmark(name: "idle-launches",
              ours: Workload(name: "a pool launch per ms", unit: "% of a CPU", runs: 1) { try idleWithLaunchPerMillisecond() },
              peers: [], isolated: true),
] }
#else
func poolBenchmarks() -> [Benchmark] { [] }
#endif
