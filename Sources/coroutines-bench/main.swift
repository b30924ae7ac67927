import Coroutines
#if canImport(Glibc)
import Glibc
#endif

#if DEBUG
emit("WARNING: coroutines-bench was built in debug mode; figures are meaningless. Use `swift run -c release coroutines-bench`.")
#endif

let benchmarks: [Benchmark] = [
    Benchmark(name: "switch",
              ours: Workload(name: "switch (asm ccoro_switch)", unit: "ns/switch", runs: 9) { rawSwitch(iterations: 5_000_000) },
              peer: Workload(name: "swift: task ping-pong", unit: "ns/switch", runs: 9) { try continuationPingPong(iterations: 200_000) }),
    Benchmark(name: "yield",
              ours: Workload(name: "yield (Coroutine.yield)", unit: "ns/switch", runs: 9) { try coroutineYield(iterations: 1_000_000) },
              peer: Workload(name: "swift: Task.yield", unit: "ns/switch", runs: 9) { try taskYield(iterations: 200_000) }),
    Benchmark(name: "generator",
              ours: Workload(name: "generator (next)", unit: "ns/element", runs: 9) { generatorCounter(iterations: 2_000_000) },
              peer: Workload(name: "swift: AsyncStream(unfolding:)", unit: "ns/element", runs: 9) { try unfoldingStreamCounter(iterations: 500_000) },
              extraPeers: [Workload(name: "swift: AsyncStream fed by task", unit: "ns/element", runs: 9) { try taskFedStreamCounter(iterations: 500_000) }]),
    Benchmark(name: "generator-in-coroutine",
              ours: Workload(name: "generator (next, in a coroutine)", unit: "ns/element", runs: 9) { try generatorCounterInCoroutine(iterations: 2_000_000) },
              peer: nil),
    Benchmark(name: "spawn",
              ours: Workload(name: "spawn (launch 100k)", unit: "ns/coroutine", runs: 9) { try coroutineSpawn(count: 100_000) },
              peer: Workload(name: "swift: withDiscardingTaskGroup", unit: "ns/task", runs: 9) { try taskSpawn(count: 100_000) }),
    Benchmark(name: "skynet",
              ours: Workload(name: "skynet (1M leaves)", unit: "ms", runs: 5) { try coroutineSkynet() },
              peer: Workload(name: "swift: TaskGroup", unit: "ms", runs: 3) { try taskSkynet() }),
    Benchmark(name: "promise",
              ours: Workload(name: "promise (fulfil → resume)", unit: "ns/op", runs: 9) { try coroutinePromise(iterations: 200_000) },
              peer: Workload(name: "swift: UnsafeContinuation", unit: "ns/op", runs: 9) { try continuationPromise(iterations: 200_000) }),
    // Memory is measured in a fresh child process per run, so stacks pooled by earlier runs
    // cannot hide the cost.
    Benchmark(name: "parked",
              ours: Workload(name: "parked (100k)", unit: "bytes/coroutine", runs: 3) { try parkedInChild("coroutines", 100_000) },
              peer: Workload(name: "swift: tasks (100k)", unit: "bytes/task", runs: 3) { try parkedInChild("tasks", 100_000) }),
    Benchmark(name: "parked-1m",
              ours: Workload(name: "parked (1M)", unit: "bytes/coroutine", runs: 1) { try parkedInChild("coroutines", 1_000_000) },
              peer: Workload(name: "swift: tasks (1M)", unit: "bytes/task", runs: 1) { try parkedInChild("tasks", 1_000_000) }),
]

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--parked-child" {
    let count = Int(CommandLine.arguments[3])!
    let value = CommandLine.arguments[2] == "tasks" ? try taskParked(count: count) : try coroutineParked(count: count)
    emit("\(value)")
    exit(0)
}

let filter = Array(CommandLine.arguments.dropFirst())
let selected = filter.isEmpty ? benchmarks : benchmarks.filter { b in filter.contains(b.name) }
if selected.isEmpty {
    emit("unknown benchmark; available: \(benchmarks.map(\.name).joined(separator: " "))")
}
for b in selected {
    let ours = try measure(b.ours)
    report(b.ours.name, ours, b.ours.unit)
    guard getenv("COROUTINES_BENCH_NO_PEER") == nil else { continue }
    for peer in (b.peer.map { [$0] } ?? []) + b.extraPeers {
        let theirs = try measure(peer)
        report(peer.name, theirs, peer.unit)
        let ratio = b.smallerIsBetter ? theirs.median / ours.median : ours.median / theirs.median
        emit("\(pad("  ratio", 28)) \(format(ratio))× in favour of coroutines" + (ratio < 1 ? " (slower)" : ""))
    }
}
