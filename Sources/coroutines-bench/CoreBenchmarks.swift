import CCoroutines
import Coroutines
import Synchronization

// MARK: switch — raw context switch between two stacks

private struct PingPong {
    var main = ccoro_context()
    var other = ccoro_context()
    var remaining = 0
}

nonisolated(unsafe) private var pingPong = UnsafeMutablePointer<PingPong>.allocate(capacity: 1)

/// Both sides of the ping-pong run this loop, so every `ret` on the way (the switch's, and this
/// function's call into it) returns where the return-stack predictor expects: the runtime's
/// coroutine-to-coroutine switch, whose two sides suspended through the same calls
/// (Scripts/boost/switch_timing.c times the other patterns, and Boost's, in C).
@inline(never)
private func switchLoop(_ from: UnsafeMutablePointer<ccoro_context>, _ to: UnsafeMutablePointer<ccoro_context>, _ rounds: Int) {
    for _ in 0..<rounds { ccoro_switch(from, to) }
}

private let pingPongEntry: @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in
    let p = pingPong
    switchLoop(&p.pointee.other, &p.pointee.main, .max)
}

func rawSwitch(iterations: Int) -> Double {
    var stack = ccoro_stack()
    precondition(ccoro_stack_map_guarded(64 * 1024, &stack) == 0)
    defer { ccoro_stack_unmap_guarded(&stack) }
    pingPong.initialize(to: PingPong())
    ccoro_make(&pingPong.pointee.other, stack.top, pingPongEntry, nil)
    let p = pingPong
    let t0 = now()
    switchLoop(&p.pointee.main, &p.pointee.other, iterations)
    let t1 = now()
    return Double(t1 - t0) / Double(iterations * 2)   // two switches per iteration
}

/// Swift peer of a raw switch: two tasks handing control back and forth, each resuming the
/// other's continuation and then suspending on its own (two task switches per round).
func continuationPingPong(iterations: Int) throws -> Double {
    try blockingAwait {
        let ping = Baton(), pong = Baton()
        let t0 = now()
        async let partner: Void = {
            for _ in 0..<iterations {
                await ping.wait()
                pong.signal()
            }
        }()
        for _ in 0..<iterations {
            ping.signal()
            await pong.wait()
        }
        await partner
        let t1 = now()
        return Double(t1 - t0) / Double(iterations * 2)
    }
}

/// A one-waiter binary semaphore on `UnsafeContinuation` + `Mutex`, resumed outside the lock.
final class Baton: Sendable {
    private enum State { case idle, signalled, waiting(UnsafeContinuation<Void, Never>) }
    private let state = Mutex<State>(.idle)

    func wait() async {
        await withUnsafeContinuation { k in
            let ready: Bool = state.withLock { s in
                if case .signalled = s { s = .idle; return true }
                s = .waiting(k)
                return false
            }
            if ready { k.resume() }
        }
    }

    func signal() {
        let k: UnsafeContinuation<Void, Never>? = state.withLock { s in
            if case .waiting(let k) = s { s = .idle; return k }
            s = .signalled
            return nil
        }
        k?.resume()
    }
}

// MARK: yield — two coroutines alternating Coroutine.yield() on one scheduler

func coroutineYield(iterations: Int) throws -> Double {
    try Coroutine.runBlocking {
        let t0 = now()
        let a = Coroutine.launch { for _ in 0..<iterations { try Coroutine.yield() } }
        let b = Coroutine.launch { for _ in 0..<iterations { try Coroutine.yield() } }
        try a.join()
        try b.join()
        let t1 = now()
        return Double(t1 - t0) / Double(iterations * 2)
    }
}

func taskYield(iterations: Int) throws -> Double {
    try blockingAwait {
        let t0 = now()
        await withDiscardingTaskGroup { group in
            for _ in 0..<2 {
                group.addTask { for _ in 0..<iterations { await Task.yield() } }
            }
        }
        let t1 = now()
        return Double(t1 - t0) / Double(iterations * 2)
    }
}

// MARK: spawn — launch N on one scheduler, each increments a counter, await the counter

// The clock stops after `runBlocking` (or `blockingAwait`) has returned, so that everything the
// run leaves to its end — reaping the last coroutines, the scheduler's heap tidy-up — is in the
// figure, on both sides.

func coroutineSpawn(count: Int) throws -> Double {
    let t0 = try Coroutine.runBlocking {
        final class Counter: @unchecked Sendable { var value = 0 }   // confined to one scheduler
        let counter = Counter()
        let done = Promise<Void>()
        let t0 = now()
        for _ in 0..<count {
            Coroutine.launch {
                counter.value += 1
                if counter.value == count { done.fulfill(()) }
            }
        }
        try done.await()
        return t0
    }
    let t1 = now()
    return Double(t1 - t0) / Double(count)
}

func taskSpawn(count: Int) throws -> Double {
    let t0 = try blockingAwait {
        let counter = AtomicCounter()
        let t0 = now()
        await withDiscardingTaskGroup { group in
            for _ in 0..<count {
                group.addTask { counter.value.add(1, ordering: .relaxed) }
            }
        }
        precondition(counter.value.load(ordering: .relaxed) == count)
        return t0
    }
    let t1 = now()
    return Double(t1 - t0) / Double(count)
}

// MARK: skynet — 1,000,000 leaves, fan-out 10, one scheduler

func skynetNode(_ num: Int, _ size: Int, _ div: Int) throws -> Int {
    if size == 1 { return num }
    let childSize = size / div
    var promises: [Promise<Int>] = []
    promises.reserveCapacity(div)
    for i in 0..<div {
        let sub = num + i * childSize
        promises.append(Coroutine.async { try skynetNode(sub, childSize, div) })
    }
    var sum = 0
    for p in promises { sum += try p.await() }
    return sum
}

func coroutineSkynet() throws -> Double {
    let t0 = try Coroutine.runBlocking {
        let t0 = now()
        let sum = try skynetNode(0, 1_000_000, 10)
        precondition(sum == 499_999_500_000, "skynet sum \(sum)")
        return t0
    }
    let t1 = now()
    return Double(t1 - t0) / 1e6
}

private func skynetTask(_ num: Int, _ size: Int, _ div: Int) async -> Int {
    if size == 1 { return num }
    let childSize = size / div
    return await withTaskGroup(of: Int.self) { group in
        for i in 0..<div {
            let sub = num + i * childSize
            group.addTask { await skynetTask(sub, childSize, div) }
        }
        var sum = 0
        for await v in group { sum += v }
        return sum
    }
}

func taskSkynet() throws -> Double {
    let t0 = try blockingAwait {
        let t0 = now()
        let sum = await skynetTask(0, 1_000_000, 10)
        precondition(sum == 499_999_500_000)
        return t0
    }
    let t1 = now()
    return Double(t1 - t0) / 1e6
}

// MARK: promise — fulfil → awaiting coroutine resumed, one scheduler

func coroutinePromise(iterations: Int) throws -> Double {
    try Coroutine.runBlocking {
        let promises = (0..<iterations).map { _ in Promise<Int>() }
        let t0 = now()
        let consumer = Coroutine.launch {
            var sum = 0
            for p in promises { sum += try p.await() }
            precondition(sum == iterations)
        }
        for p in promises {
            p.fulfill(1)
            try Coroutine.yield()
        }
        try consumer.join()
        let t1 = now()
        return Double(t1 - t0) / Double(iterations)
    }
}

/// Swift peer: a task awaiting continuations that another task resumes, one after another.
func continuationPromise(iterations: Int) throws -> Double {
    try blockingAwait {
        let slots = (0..<iterations).map { _ in ContinuationSlot() }
        let t0 = now()
        async let consumer: Int = {
            var sum = 0
            for s in slots { sum += await s.wait() }
            return sum
        }()
        for s in slots {
            s.fulfill(1)
            await Task.yield()
        }
        let sum = await consumer
        precondition(sum == iterations)
        let t1 = now()
        return Double(t1 - t0) / Double(iterations)
    }
}

/// A one-shot value that one task awaits and another fulfils (UnsafeContinuation + Mutex).
final class ContinuationSlot: Sendable {
    private enum State { case empty, waiting(UnsafeContinuation<Int, Never>), value(Int) }
    private let state = Mutex<State>(.empty)

    func wait() async -> Int {
        await withUnsafeContinuation { k in
            let ready: Int? = state.withLock { s in
                if case .value(let v) = s { return v }
                s = .waiting(k)
                return nil
            }
            if let ready { k.resume(returning: ready) }
        }
    }

    func fulfill(_ v: Int) {
        let k: UnsafeContinuation<Int, Never>? = state.withLock { s in
            if case .waiting(let k) = s { return k }
            s = .value(v)
            return nil
        }
        k?.resume(returning: v)
    }
}

// MARK: parked — N suspended coroutines, each with a 512-byte local live across a suspension

func coroutineParked(count: Int) throws -> Double {
    try Coroutine.runBlocking {
        let gate = Promise<Void>()
        let before = residentBytes()
        final class Counter: @unchecked Sendable { var value = 0; var parked = 0 }
        let counter = Counter()
        let allParked = Promise<Void>()
        for i in 0..<count {
            Coroutine.launch {
                var local = (UInt64(i), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
                             UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
                var local2 = local, local3 = local, local4 = local   // 4 × 128 bytes = 512 bytes
                local2.1 = 1; local3.2 = 2; local4.3 = 3
                counter.parked += 1
                if counter.parked == count { allParked.fulfill(()) }
                try gate.await()
                local.1 = local2.1 + local3.2 + local4.3
                counter.value += Int(local.0 &+ local.1) - i
            }
        }
        try allParked.await()
        let after = residentBytes()
        gate.fulfill(())
        // Join by yielding until all have run.
        while counter.value < count * 6 { try Coroutine.yield() }
        return Double(after - before) / Double(count)
    }
}

func taskParked(count: Int) throws -> Double {
    try blockingAwait {
        let gate = Gate()
        let before = residentBytes()
        let parked = AtomicCounter()
        return await withDiscardingTaskGroup(returning: Double.self) { group in
            for i in 0..<count {
                group.addTask {
                    var local = (UInt64(i), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
                                 UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
                    var local2 = local, local3 = local, local4 = local
                    local2.1 = 1; local3.2 = 2; local4.3 = 3
                    parked.value.add(1, ordering: .relaxed)
                    await gate.wait()
                    local.1 = local2.1 + local3.2 + local4.3
                    precondition(local.1 == 6 && local.0 == UInt64(i))
                }
            }
            while parked.value.load(ordering: .relaxed) < count || gate.waiting < count { await Task.yield() }
            let after = residentBytes()
            gate.open()
            return Double(after - before) / Double(count)
        }
    }
}

/// Many tasks wait until `open()`.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [UnsafeContinuation<Void, Never>])>((false, []))
    var waiting: Int { state.withLock { $0.waiters.count } }
    func wait() async {
        await withUnsafeContinuation { k in
            let now: Bool = state.withLock { s in
                if s.open { return true }
                s.waiters.append(k)
                return false
            }
            if now { k.resume() }
        }
    }
    func open() {
        let ws = state.withLock { s in
            s.open = true
            let w = s.waiters
            s.waiters = []
            return w
        }
        for k in ws { k.resume() }
    }
}

final class AtomicCounter: Sendable {
    let value = Atomic<Int>(0)
}
