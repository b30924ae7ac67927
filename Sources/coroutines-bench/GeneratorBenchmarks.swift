import Coroutines
import Synchronization

// MARK: generator — next() of an infinite counter

/// `next()` of a generator whose body counts forever: two context switches per element, no
/// scheduler, no allocation. The generator is released at the end (its body is unwound).
func generatorCounter(iterations: Int) -> Double {
    let counter = Generator<Int> { yield in
        var i = 0
        while true {
            try yield(i)
            i &+= 1
        }
    }
    var sum = 0
    let t0 = now()
    for _ in 0..<iterations {
        sum &+= counter.next().unsafelyUnwrapped
    }
    let t1 = now()
    precondition(sum == iterations * (iterations - 1) / 2, "generator produced wrong elements")
    return Double(t1 - t0) / Double(iterations)
}

/// Swift peer: `AsyncStream(unfolding:)` of the same counter, consumed by one task.
func unfoldingStreamCounter(iterations: Int) throws -> Double {
    try blockingAwait {
        let state = UnfoldState()
        let stream = AsyncStream<Int>(unfolding: { state.next() })
        var iterator = stream.makeAsyncIterator()
        var sum = 0
        let t0 = now()
        for _ in 0..<iterations {
            sum &+= await iterator.next().unsafelyUnwrapped
        }
        let t1 = now()
        precondition(sum == iterations * (iterations - 1) / 2, "stream produced wrong elements")
        return Double(t1 - t0) / Double(iterations)
    }
}

/// Swift peer: an `AsyncStream` (unbounded buffer) whose continuation is fed by a producer task,
/// consumed by another task.
func taskFedStreamCounter(iterations: Int) throws -> Double {
    try blockingAwait {
        let (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .unbounded)
        let t0 = now()
        let producer = Task {
            for i in 0..<iterations { continuation.yield(i) }
            continuation.finish()
        }
        var sum = 0
        for await v in stream { sum &+= v }
        let t1 = now()
        await producer.value
        precondition(sum == iterations * (iterations - 1) / 2, "stream produced wrong elements")
        return Double(t1 - t0) / Double(iterations)
    }
}

/// The counter behind the unfolding stream (touched by one task at a time).
final class UnfoldState: @unchecked Sendable {
    private var i = -1
    func next() -> Int? {
        i &+= 1
        return i
    }
}

/// The same counter consumed inside a coroutine: the body then runs on the coroutine's behalf
/// (its record describes the generator's stack while the body runs), which costs a little more
/// per element than on a plain thread.
func generatorCounterInCoroutine(iterations: Int) throws -> Double {
    try Coroutine.runBlocking { generatorCounter(iterations: iterations) }
}
