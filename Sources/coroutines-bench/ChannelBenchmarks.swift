import Coroutines
import Dispatch
import Foundation
import Synchronization

// MARK: pingpong — unbuffered, two coroutines, one scheduler (or two: pingpong-threads)

/// Round trips over two rendezvous channels. With `threads`, the two coroutines run on two
/// dedicated schedulers (threads); otherwise both run on one.
func coroutinePingPong(iterations: Int, threads: Bool) throws -> Double {
    let other = threads ? CoroutineScheduler(name: "pingpong-peer") : nil
    defer { other?.stop() }
    return try Coroutine.runBlocking {
        let ping = Channel<Int>(), pong = Channel<Int>()
        let echo = Coroutine.launch(on: other) {
            for _ in 0..<iterations { try pong.send(try ping.receive()) }
        }
        let t0 = now()
        var sum = 0
        for i in 0..<iterations {
            try ping.send(i)
            sum &+= try pong.receive()
        }
        let t1 = now()
        try echo.join()
        precondition(sum == iterations * (iterations - 1) / 2)
        return Double(t1 - t0) / Double(iterations)
    }
}

func peerPingPong<K: PeerContinuationKind>(_ kind: K.Type, iterations: Int) throws -> Double {
    try blockingAwait {
        let ping = PeerChannel<K>(), pong = PeerChannel<K>()
        let echo = Task {
            for _ in 0..<iterations { _ = await pong.send(await ping.receive()!) }
        }
        let t0 = now()
        var sum = 0
        for i in 0..<iterations {
            _ = await ping.send(i)
            sum &+= await pong.receive()!
        }
        let t1 = now()
        await echo.value
        precondition(sum == iterations * (iterations - 1) / 2)
        return Double(t1 - t0) / Double(iterations)
    }
}

// MARK: the hardware floor beside pingpong-threads — one cache line bounced between two threads

/// Benchmark helper, not runtime API: the least any hand-off between two threads can cost here.
/// Two plain threads bounce one cache line, a counter each side spin-waits on for its parity
/// (odd: the echo thread's turn, even: the measuring thread's), with no runtime, no lock and no
/// system call in between. A round trip is two transfers of the line, as pingpong-threads' is
/// two wake-ups. Plain Swift `Atomic` loads and stores compile to the moves a C version would
/// use, so it needs no C.
///
/// Needs two CPUs: with one (the pinned runs of Scripts/bench.sh and Scripts/ab.sh) a waiting
/// thread would spin through its whole time slice, so `nil` is returned and the row is skipped.
func cacheLinePingPong(iterations: Int) -> Double? {
    guard processorsAvailable() > 1 else { return nil }
    let line = BouncedCacheLine()
    let echoDone = DispatchSemaphore(value: 0)
    let echo = Thread {
        line.counter.store(0, ordering: .releasing)   // started
        for i in 0..<iterations {
            let mine = 2 * i + 1
            while line.counter.load(ordering: .acquiring) != mine {}
            line.counter.store(mine + 1, ordering: .releasing)
        }
        echoDone.signal()
    }
    echo.start()
    while line.counter.load(ordering: .acquiring) != 0 {}
    let t0 = now()
    for i in 0..<iterations {
        line.counter.store(2 * i + 1, ordering: .releasing)
        while line.counter.load(ordering: .acquiring) != 2 * i + 2 {}
    }
    let t1 = now()
    echoDone.wait()
    return Double(t1 - t0) / Double(iterations)
}

/// The bounced counter, alone on its cache lines: the object's header shares the first line with
/// nothing else that either thread writes, and the padding keeps other allocations off it.
final class BouncedCacheLine: @unchecked Sendable {
    let counter = Atomic<Int>(-1)
    private let padding: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
}

// MARK: buffered — capacity 64, one producer → one consumer

func coroutineBuffered(messages: Int) throws -> Double {
    try Coroutine.runBlocking {
        let channel = Channel<Int>(capacity: 64)
        let t0 = now()
        Coroutine.launch {
            for i in 0..<messages { try channel.send(i) }
        }
        var sum = 0
        for _ in 0..<messages { sum &+= try channel.receive() }
        let t1 = now()
        precondition(sum == messages * (messages - 1) / 2)
        return Double(t1 - t0) / Double(messages)
    }
}

func peerBuffered<K: PeerContinuationKind>(_ kind: K.Type, messages: Int) throws -> Double {
    try blockingAwait {
        let channel = PeerChannel<K>(capacity: 64)
        let t0 = now()
        let producer = Task {
            for i in 0..<messages { _ = await channel.send(i) }
        }
        var sum = 0
        for _ in 0..<messages { sum &+= await channel.receive()! }
        let t1 = now()
        await producer.value
        precondition(sum == messages * (messages - 1) / 2)
        return Double(t1 - t0) / Double(messages)
    }
}

// MARK: select — 2-way receive select, one scheduler

/// Two producers send on their own rendezvous channel; one consumer selects over both.
func coroutineSelect(operations: Int) throws -> Double {
    try Coroutine.runBlocking {
        let a = Channel<Int>(), b = Channel<Int>()
        // The producers end when the channels close (their send throws ChannelError.closed).
        Coroutine.launch { do { while true { try a.send(1) } } catch {} }
        Coroutine.launch { do { while true { try b.send(2) } } catch {} }
        let t0 = now()
        var fromA = 0
        for _ in 0..<operations {
            fromA += try select { s in
                s.receive(from: a) { _ in 1 }
                s.receive(from: b) { _ in 0 }
            }
        }
        let t1 = now()
        a.close()
        b.close()
        precondition(fromA > operations / 4 && fromA < operations * 3 / 4, "select is not fair: \(fromA) of \(operations)")
        return Double(t1 - t0) / Double(operations)
    }
}

// MARK: sieve — first 2,000 primes, a filter coroutine per prime

func coroutineSieve(primes count: Int) throws -> Double {
    try Coroutine.runBlocking {
        let t0 = now()
        var source = Coroutine.produce { (out: Channel<Int>) in
            var n = 2
            while true {
                try out.send(n)
                n += 1
            }
        }
        var last = 0
        for _ in 0..<count {
            let prime = try source.receive()
            last = prime
            let input = source
            source = Coroutine.produce { out in
                defer { input.close() }
                for n in input where n % prime != 0 { try out.send(n) }
            }
        }
        let t1 = now()
        source.close()
        precondition(count != 2_000 || last == 17_389, "the 2,000th prime is 17,389, got \(last)")
        return Double(t1 - t0) / 1e6
    }
}

func peerSieve<K: PeerContinuationKind>(_ kind: K.Type, primes count: Int) throws -> Double {
    try blockingAwait {
        let t0 = now()
        let first = PeerChannel<K>()
        Task {
            var n = 2
            while await first.send(n) { n += 1 }
        }
        var source = first
        var last = 0
        for _ in 0..<count {
            guard let prime = await source.receive() else { break }
            last = prime
            let input = source, output = PeerChannel<K>()
            Task {
                defer { input.close() }
                while let n = await input.receive() {
                    if n % prime != 0, !(await output.send(n)) { return }
                }
            }
            source = output
        }
        let t1 = now()
        source.close()
        precondition(count != 2_000 || last == 17_389, "the 2,000th prime is 17,389, got \(last)")
        return Double(t1 - t0) / 1e6
    }
}

// MARK: actor — send → reply awaited, one scheduler

/// An actor on the current scheduler that adds each message to a total and replies with it.
func makeCounterActor() -> CoroutineActor<Int, Int> {
    CoroutineActor<Int, Int> { mailbox in
        var total = 0
        for envelope in mailbox {
            total &+= envelope.message
            envelope.reply(total)
        }
    }
}

func coroutineActor(messages: Int) throws -> Double {
    try Coroutine.runBlocking {
        let actor = makeCounterActor()
        let t0 = now()
        var last = 0
        for _ in 0..<messages { last = try actor.send(1).await() }
        let t1 = now()
        actor.cancel()
        precondition(last == messages)
        return Double(t1 - t0) / Double(messages)
    }
}

actor SwiftCounter {
    var total = 0
    func add(_ n: Int) -> Int {
        total &+= n
        return total
    }
}

/// Swift peer: a method call on a Swift `actor` from one task.
func swiftActor(messages: Int) throws -> Double {
    try blockingAwait {
        let counter = SwiftCounter()
        let t0 = now()
        var last = 0
        for _ in 0..<messages { last = await counter.add(1) }
        let t1 = now()
        precondition(last == messages)
        return Double(t1 - t0) / Double(messages)
    }
}
