import Coroutines
import Foundation

// MARK: timer-precision — how late a 200 µs timer fires

/// Timed waits per run.
let timerSamples = 1_000
/// The wait every sample asks for.
let timerRequest: Duration = .microseconds(200)

/// Median and 99th percentile of `samples` (µs), the median returned and the p99 recorded as
/// `workload`'s second figure.
func overshootFigures(_ workload: String, _ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    recordSecondary(workload, sorted[sorted.count * 99 / 100], unit: "µs p99")
    return sorted[sorted.count / 2]
}

/// How much later than asked `Coroutine.delay(.microseconds(200))` returns, in µs (the median
/// of 1,000 waits; the p99 as the second figure).
func coroutineDelayOvershoot() throws -> Double {
    let samples = try Coroutine.runBlocking {
        try (0..<timerSamples).map { _ -> Double in
            let t0 = now()
            try Coroutine.delay(timerRequest)
            return Double(now() - t0) / 1_000 - 200
        }
    }
    return overshootFigures("delay(200 µs) overshoot", samples)
}

/// The same for a `select` whose only case is a 200 µs timeout (a channel that never delivers).
func coroutineSelectTimeoutOvershoot() throws -> Double {
    let samples = try Coroutine.runBlocking {
        let never = Channel<Int>()
        return try (0..<timerSamples).map { _ -> Double in
            let t0 = now()
            let timedOut = try select { s in
                s.receive(from: never) { _ in false }
                s.timeout(after: timerRequest) { true }
            }
            precondition(timedOut)
            return Double(now() - t0) / 1_000 - 200
        }
    }
    return overshootFigures("select timeout overshoot", samples)
}

/// Swift peer: `Task.sleep(for: .microseconds(200))`.
func taskSleepOvershoot() throws -> Double {
    let samples = try blockingAwait {
        var samples: [Double] = []
        for _ in 0..<timerSamples {
            let t0 = now()
            try await Task.sleep(for: timerRequest)
            samples.append(Double(now() - t0) / 1_000 - 200)
        }
        return samples
    }
    return overshootFigures("swift: Task.sleep overshoot", samples)
}

func timerBenchmarks() -> [Benchmark] { [
    Benchmark(name: "timer-precision",
              ours: Workload(name: "delay(200 µs) overshoot", unit: "µs", runs: 3) { try coroutineDelayOvershoot() },
              peers: [Workload(name: "select timeout overshoot", unit: "µs", runs: 3) { try coroutineSelectTimeoutOvershoot() },
                      Workload(name: "swift: Task.sleep overshoot", unit: "µs", runs: 3) { try taskSleepOvershoot() }]),
] }
