import Coroutines
#if canImport(Glibc)
import Glibc
#endif

#if DEBUG
emit("WARNING: coroutines-bench was built in debug mode; figures are meaningless. Use `swift run -c release coroutines-bench`.")
#endif

// Every workload runs in a process with more than one thread (see `startIdleThread`).
startIdleThread()

let coreBenchmarks: [Benchmark] = [
    Benchmark(name: "switch",
              ours: Workload(name: "switch (asm ccoro_switch)", unit: "ns/switch", runs: 9) { rawSwitch(iterations: 5_000_000) },
              peers: [Workload(name: "swift: task ping-pong", unit: "ns/switch", runs: 9) { try continuationPingPong(iterations: 200_000) }]),
    Benchmark(name: "yield",
              ours: Workload(name: "yield (Coroutine.yield)", unit: "ns/switch", runs: 9) { try coroutineYield(iterations: 1_000_000) },
              peers: [Workload(name: "swift: Task.yield", unit: "ns/switch", runs: 9) { try taskYield(iterations: 200_000) }]),
    Benchmark(name: "generator",
              ours: Workload(name: "generator (next)", unit: "ns/element", runs: 9) { generatorCounter(iterations: 2_000_000) },
              peers: [Workload(name: "swift: AsyncStream(unfolding:)", unit: "ns/element", runs: 9) { try unfoldingStreamCounter(iterations: 500_000) },
                      Workload(name: "swift: AsyncStream fed by task", unit: "ns/element", runs: 9) { try taskFedStreamCounter(iterations: 500_000) }]),
    Benchmark(name: "generator-in-coroutine",
              ours: Workload(name: "generator (next, in a coroutine)", unit: "ns/element", runs: 9) { try generatorCounterInCoroutine(iterations: 2_000_000) },
              peers: []),
    Benchmark(name: "spawn",
              ours: Workload(name: "spawn (launch 100k)", unit: "ns/coroutine", runs: 9) { try coroutineSpawn(count: 100_000) },
              peers: [Workload(name: "swift: withDiscardingTaskGroup", unit: "ns/task", runs: 9) { try taskSpawn(count: 100_000) }]),
    Benchmark(name: "skynet",
              ours: Workload(name: "skynet (1M leaves)", unit: "ms", runs: 5) { try coroutineSkynet() },
              peers: [Workload(name: "swift: TaskGroup", unit: "ms", runs: 3) { try taskSkynet() }]),
    Benchmark(name: "promise",
              ours: Workload(name: "promise (fulfil → resume)", unit: "ns/op", runs: 9) { try coroutinePromise(iterations: 200_000) },
              peers: [Workload(name: "swift: UnsafeContinuation", unit: "ns/op", runs: 9) { try continuationPromise(iterations: 200_000) }]),
    // Memory is measured in a fresh child process per run, so stacks pooled by earlier runs
    // cannot hide the cost.
    Benchmark(name: "parked",
              ours: Workload(name: "parked (100k)", unit: "bytes/coroutine", runs: 3) { try parkedInChild("coroutines", 100_000) },
              peers: [Workload(name: "swift: tasks (100k)", unit: "bytes/task", runs: 3) { try parkedInChild("tasks", 100_000) }]),
    Benchmark(name: "pingpong",
              ours: Workload(name: "pingpong (one scheduler)", unit: "ns/round trip", runs: 9) { try coroutinePingPong(iterations: 500_000, threads: false) },
              peers: [Workload(name: "swift: UnsafeContinuation chan", unit: "ns/round trip", runs: 9) { try peerPingPong(UnsafeKind.self, iterations: 200_000) },
                      Workload(name: "swift: CheckedContinuation chan", unit: "ns/round trip", runs: 9) { try peerPingPong(CheckedKind.self, iterations: 200_000) }]),
    Benchmark(name: "pingpong-threads",
              ours: Workload(name: "pingpong (two schedulers)", unit: "ns/round trip", runs: 9) { try coroutinePingPong(iterations: 200_000, threads: true) },
              peers: [Workload(name: "swift: UnsafeContinuation chan", unit: "ns/round trip", runs: 9) { try peerPingPong(UnsafeKind.self, iterations: 200_000) },
                      Workload(name: "swift: CheckedContinuation chan", unit: "ns/round trip", runs: 9) { try peerPingPong(CheckedKind.self, iterations: 200_000) },
                      // The hardware's floor for the hand-off: one cache line, two spinning threads.
                      Workload(name: "hw: cache-line ping-pong", unit: "ns/round trip", runs: 9,
                               skipReason: processorsAvailable() > 1 ? nil : "needs two CPUs (the process may use one)",
                               isFloor: true) { cacheLinePingPong(iterations: 200_000) ?? .nan }]),
    Benchmark(name: "buffered",
              ours: Workload(name: "buffered (capacity 64)", unit: "ns/message", runs: 9) { try coroutineBuffered(messages: 2_000_000) },
              peers: [Workload(name: "swift: UnsafeContinuation chan", unit: "ns/message", runs: 9) { try peerBuffered(UnsafeKind.self, messages: 1_000_000) },
                      Workload(name: "swift: CheckedContinuation chan", unit: "ns/message", runs: 9) { try peerBuffered(CheckedKind.self, messages: 1_000_000) }]),
    Benchmark(name: "select",
              ours: Workload(name: "select (2-way receive)", unit: "ns/op", runs: 9) { try coroutineSelect(operations: 500_000) },
              peers: []),
    Benchmark(name: "sieve",
              ours: Workload(name: "sieve (2,000 primes)", unit: "ms", runs: 5) { try coroutineSieve(primes: 2_000) },
              peers: [Workload(name: "swift: UnsafeContinuation chan", unit: "ms", runs: 3) { try peerSieve(UnsafeKind.self, primes: 2_000) },
                      Workload(name: "swift: CheckedContinuation chan", unit: "ms", runs: 3) { try peerSieve(CheckedKind.self, primes: 2_000) }]),
    Benchmark(name: "actor",
              ours: Workload(name: "actor (send → reply awaited)", unit: "ns/op", runs: 9) { try coroutineActor(messages: 500_000) },
              peers: [Workload(name: "swift: actor method call", unit: "ns/op", runs: 9) { try swiftActor(messages: 1_000_000) }]),
    Benchmark(name: "echo",
              ours: Workload(name: "echo (coroutine per connection)", unit: "requests/s", runs: 5) { try coroutineEcho() },
              peers: [Workload(name: "swift: task per connection", unit: "requests/s", runs: 5) { try taskEcho() }],
              smallerIsBetter: false),
    Benchmark(name: "parked-1m",
              ours: Workload(name: "parked (1M)", unit: "bytes/coroutine", runs: 1) { try parkedInChild("coroutines", 1_000_000) },
              peers: [Workload(name: "swift: tasks (1M)", unit: "bytes/task", runs: 1) { try parkedInChild("tasks", 1_000_000) }]),
]

let benchmarks: [Benchmark] = coreBenchmarks + actorRequestBenchmarks() + timerBenchmarks() + syncBenchmarks() + dumpBenchmarks()
    + poolBenchmarks()

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--parked-child" {
    let count = Int(CommandLine.arguments[3])!
    let value = CommandLine.arguments[2] == "tasks" ? try taskParked(count: count) : try coroutineParked(count: count)
    emit("\(value)")
    exit(0)
}

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--workload",
   let b = benchmarks.first(where: { $0.name == CommandLine.arguments[2] }), let index = Int(CommandLine.arguments[3]) {
    try runWorkloadChild(b, index)
    exit(0)
}

if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "--echo-client" {
    try runEchoClientCommand(Array(CommandLine.arguments.dropFirst(2)))
    exit(0)
}

let filter = Array(CommandLine.arguments.dropFirst())
let selected = filter.isEmpty ? benchmarks : benchmarks.filter { b in filter.contains(b.name) }
if selected.isEmpty {
    emit("unknown benchmark; available: \(benchmarks.map(\.name).joined(separator: " "))")
}
for b in selected {
    let ours = try measure(b, workload: 0)
    report(b.ours.name, ours, b.ours.unit)
    reportSecondary(b.ours.name)
    guard getenv("COROUTINES_BENCH_NO_PEER") == nil else { continue }
    for (i, peer) in b.peers.enumerated() {
        if let why = peer.skipReason {
            emit("\(pad(peer.name, 28)) skipped: \(why)")
            continue
        }
        let theirs = try measure(b, workload: i + 1)
        report(peer.name, theirs, peer.unit)
        reportSecondary(peer.name)
        if peer.isFloor {
            emit("\(pad("  floor", 28)) \(format(ours.median / theirs.median))× the hardware floor")
            continue
        }
        let ratio = b.smallerIsBetter ? theirs.median / ours.median : ours.median / theirs.median
        emit("\(pad("  ratio", 28)) \(format(ratio))× in favour of coroutines" + (ratio < 1 ? " (slower)" : ""))
    }
}
