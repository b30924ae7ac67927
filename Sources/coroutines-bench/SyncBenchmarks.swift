import Coroutines
import Foundation

// Left out of `Scripts/ab.sh` builds (`AB_COMPARISON`), as the pool benchmarks are: it uses a
// user-created pool, which commits before pool launches cannot build.
#if !AB_COMPARISON

// MARK: mutex-contended — N coroutines taking turns at one CoroutineMutex

/// Lock and unlock rounds per coroutine (and per task of the peer).
let mutexRounds = 100

/// ns per lock-and-unlock: `count` coroutines, pool launches onto a 2-scheduler pool, each
/// locks one `CoroutineMutex` and unlocks it `mutexRounds` times around a counter; the clock
/// stops when all have finished.
func coroutineMutexContended(count: Int) throws -> Double {
    let pool = SchedulerPool(name: "mutex-contended", count: 2)!
    defer { pool.stop() }
    let mutex = CoroutineMutex()
    final class Counter: @unchecked Sendable { var value = 0 }
    let counter = Counter()
    let t0 = now()
    let all = (0..<count).map { _ in
        Coroutine.launch(on: pool) {
            for _ in 0..<mutexRounds {
                try mutex.withLock { counter.value += 1 }
            }
        }
    }
    try Coroutine.runBlocking { for c in all { try c.join() } }
    let t1 = now()
    precondition(counter.value == count * mutexRounds, "mutex-contended lost updates: \(counter.value)")
    return Double(t1 - t0) / Double(count * mutexRounds)
}

/// Swift peer: `count` tasks of one task group each make `mutexRounds` calls to an actor that
/// serialises the same counter.
func actorContended(count: Int) throws -> Double {
    actor CounterActor {
        var value = 0
        func increment() { value += 1 }
    }
    let counter = CounterActor()
    let t0 = now()
    let total = try blockingAwait {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask { for _ in 0..<mutexRounds { await counter.increment() } }
            }
        }
        return await counter.value
    }
    let t1 = now()
    precondition(total == count * mutexRounds)
    return Double(t1 - t0) / Double(count * mutexRounds)
}

func syncBenchmarks() -> [Benchmark] { [
    Benchmark(name: "mutex-contended",
              ours: Workload(name: "mutex (1,000 coroutines)", unit: "ns/lock+unlock", runs: 5) { try coroutineMutexContended(count: 1_000) },
              peers: [Workload(name: "mutex (100,000 coroutines)", unit: "ns/lock+unlock", runs: 3) { try coroutineMutexContended(count: 100_000) },
                      Workload(name: "swift: actor (1,000 tasks)", unit: "ns/call", runs: 5) { try actorContended(count: 1_000) },
                      Workload(name: "swift: actor (100,000 tasks)", unit: "ns/call", runs: 3) { try actorContended(count: 100_000) }],
              isolated: true),
] }
#else
func syncBenchmarks() -> [Benchmark] { [] }
#endif
