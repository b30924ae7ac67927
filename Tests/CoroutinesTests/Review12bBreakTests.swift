import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit
private typealias Tally = CoroutineTestKit.Tally

/// Review 12b: a lazily created `Coroutine.async` coroutine links its promise only when its body
/// starts (`Promise.runLazilyStartedCoroutineBody`); pending launches keep their bodies in a ring
/// of their own (`PendingLaunchQueue`). These tests aim at what Review12BreakTests and
/// LazyLaunchTests do not: the ring's growth and release, `Coroutine.current`, timeouts and
/// `cancel(after:)` on the lazily created coroutine, `Promise.cancel()` after the body started,
/// and a lock-step race of `Promise.cancel()` from another thread with the body's start.
@Suite("Review 12b: lazily linked Coroutine.async promises, the pending-launch ring", .serialized)
struct Review12bBreakTests {
    private struct Boom: Error {}

    private static func describe<T>(_ r: Result<T, any Error>?) -> String {
        switch r {
        case nil: "pending"
        case .success(let v): "value \(v)"
        case .failure(let e) where e is CancellationError: "cancelled"
        case .failure(CoroutineError.timedOut): "timedOut"
        case .failure(CoroutineError.schedulerStopped): "stopped"
        case .failure(let e): "error \(e)"
        }
    }

    // MARK: PendingLaunchQueue on its own

    @Test("PendingLaunchQueue: growth across a wrapped head keeps FIFO; deallocate() with launches queued releases every body and parent reference once and never touches the observers")
    func ringGrowthAndDeallocate() async throws {
        try await Kit.withScheduler("r12b-ring") { s in
            let released = Kit.Counter()
            final class Parent: @unchecked Sendable { weak var c: Coroutine? }
            let weakParent = Parent()
            let order = Kit.Log<Int>()
            let observers = (0..<4).map { _ in Promise<Int>() }
            do {
                let parent = Coroutine(scheduler: s, name: "ring-parent", stackSize: nil, reportsUnobservedErrors: false,
                                       unstartedObserver: nil, body: {})
                weakParent.c = parent
                var q = PendingLaunchQueue(capacity: 8)
                var next = 0
                func push(_ k: Int) {
                    for _ in 0..<k {
                        let i = next
                        next += 1
                        let tracker = Kit.Tracker(released)
                        q.append(PendingLaunch(observer: observers[i % 4], parent: Unmanaged.passUnretained(parent).retain(),
                                               cancelAllCount: i),
                                 body: { withExtendedLifetime(tracker) {}; order.append(i) })
                    }
                }
                func pop(_ k: Int) throws {
                    for _ in 0..<k {
                        let (launch, body) = q.popFirst()
                        #expect(launch.observer === observers[launch.cancelAllCount % 4])
                        launch.parent.release()
                        try body()
                    }
                }
                push(6); try pop(5)          // head at 5 of 8
                push(7)                      // 8 queued, wrapping
                push(3000)                   // grows 8 → 4096 with a wrapped head, then again
                try pop(1000)
                push(5000)                   // grows with head at 1000
                #expect(q.count == 1 + 7 + 3000 - 1000 + 5000)
                try pop(2000)
                #expect(order.all == Array(0..<3005), "FIFO broken across growth")
                #expect(released.value == 3005, "\(released.value) bodies released after 3005 ran")
                q.deallocate()               // 5,008 launches still queued
                #expect(released.value == next, "\(released.value) of \(next) bodies released after deallocate()")
                #expect(order.all.count == 3005, "deallocate() ran a body")
            }
            #expect(weakParent.c == nil, "a parent reference leaked (or was over-released) by the ring")
            #expect(observers.allSatisfy { $0.isPending }, "deallocate() settled an observer")
        }
    }

    @Test("20,000 Coroutine.async launched without yielding (2,000 with COROUTINES_HEAVY_TESTS=0), after the ring's head moved: they start in order, every body and coroutine is released once, nothing stays pending",
          arguments: [false, true])
    func manyPendingGrowWrapped(freshScheduler: Bool) async throws {
        // A third of the bodies yield, and wait behind the rest: under ThreadSanitizer
        // (COROUTINES_HEAVY_TESTS=0) each of those also holds a fiber's mappings, and 20,000
        // took the process to the vm.max_map_count limit beside the other suites.
        let n = Kit.heavyTestsEnabled ? 20_000 : 2_000
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let starts = Kit.Log<Int>()
        let s = CoroutineScheduler(name: "r12b-grow-\(freshScheduler)")
        defer { s.stop() }
        if !freshScheduler {
            // Warm the scheduler's stack cache so that launches switch directly.
            try await Coroutine.async(on: s) { () throws -> Void in
                let ps = (0..<100).map { i in Coroutine.async { i } }
                for p in ps { _ = try p.await() }
            }.value
        }
        let sum = try await Coroutine.async(on: s) { () throws -> Int in
            // 40 run first: the ring's head is no longer at 0 when it grows.
            let first = (0..<40).map { i in Coroutine.async { () -> Int in starts.append(-1); return i } }
            try Coroutine.yield()
            var ps: [Promise<Int>] = []
            ps.reserveCapacity(n)
            for i in 0..<n {
                let tracker = Kit.Tracker(released)
                ps.append(Coroutine.async { () throws -> Int in
                    withExtendedLifetime(tracker) {}
                    if i % 1000 == 0, let c = Coroutine.current { weak.add(c) }
                    starts.append(i)
                    if i % 3 == 0 { try Coroutine.yield() }
                    return i
                })
            }
            #expect(s.pendingLaunchCount.load(ordering: .relaxed) == n)
            var total = 0
            for p in first + ps { total += try p.await() }
            return total
        }.value
        #expect(sum == (0..<40).reduce(0, +) + (0..<n).reduce(0, +))
        let started = starts.all.filter { $0 >= 0 }
        #expect(started == Array(0..<n), "launches did not start in launch order")
        #expect(await Kit.eventually(timeout: .seconds(20)) { released.value == n }, "\(released.value) of \(n) bodies released")
        #expect(await Kit.eventually(timeout: .seconds(20)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
        #expect(s.pendingLaunchCount.load(ordering: .relaxed) == 0)
        #expect(await Kit.eventually(timeout: .seconds(20)) { s.liveCount == 0 })
    }

    // MARK: The coroutine a lazily started body runs in

    @Test("Coroutine.current inside a lazily started body: its own coroutine (not the parent's), stable across suspensions, joinable, finished with no error, then freed")
    func currentInsideLazyBody() async throws {
        let weak = Kit.WeakCoroutines()
        try await Kit.withScheduler("r12b-current") { s in
            let report = try await Coroutine.async(on: s) { () throws -> [String] in
                let me = try #require(Coroutine.current)
                var problems: [String] = []
                let promises = (0..<3).map { i in
                    Coroutine.async { () throws -> Coroutine? in
                        let c = Coroutine.current
                        if let c { weak.add(c) }
                        try Coroutine.yield()
                        if Coroutine.current !== c { throw Boom() }
                        _ = i
                        return c
                    }
                }
                let children = try promises.map { try $0.await() }
                for (i, c) in children.enumerated() {
                    guard let c else { problems.append("\(i): no current coroutine"); continue }
                    if c === me { problems.append("\(i): the parent's coroutine") }
                    if c.scheduler !== s { problems.append("\(i): on \(c.scheduler.name)") }
                    if c.name != nil { problems.append("\(i): named \(c.name!)") }
                    try c.join()   // finishes just after settling its promise
                    if !c.isFinished { problems.append("\(i): not finished after join") }
                    if c.error != nil { problems.append("\(i): error \(c.error!)") }
                    if c.isCancelled { problems.append("\(i): cancelled") }
                }
                if Set(children.compactMap { $0.map(ObjectIdentifier.init) }).count != 3 {
                    problems.append("siblings share a coroutine")
                }
                return problems
            }.value
            #expect(report.isEmpty, "\(report)")
        }
        #expect(weak.count == 3)
        #expect(await Kit.eventually(timeout: .seconds(20)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    @Test("withTimeout inside a lazily started body: the delay is interrupted, the promise rejects with timedOut, the coroutine is freed")
    func withTimeoutInsideLazyBody() async throws {
        let weak = Kit.WeakCoroutines()
        let released = Kit.Counter()
        try await Kit.withScheduler("r12b-timeout") { s in
            let outcomes = try await Coroutine.async(on: s) { () throws -> [String] in
                let ps = (0..<20).map { i in
                    let tracker = Kit.Tracker(released)
                    return Coroutine.async { () throws -> Int in
                        withExtendedLifetime(tracker) {}
                        if let c = Coroutine.current { weak.add(c) }
                        return try Coroutine.withTimeout(.milliseconds(i % 2 == 0 ? 50 : 30_000)) {
                            if i % 2 == 0 { try Coroutine.delay(.seconds(60)) }
                            return i
                        }
                    }
                }
                let start = ContinuousClock.now
                let results = ps.map { p in Self.describe(Result { try p.await() }) }
                if ContinuousClock.now - start > .seconds(20) { return ["took \(ContinuousClock.now - start)"] }
                return results
            }.value
            #expect(outcomes == (0..<20).map { $0 % 2 == 0 ? "timedOut" : "value \($0)" })
        }
        #expect(released.value == 20)
        #expect(await Kit.eventually(timeout: .seconds(20)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    @Test("cancel(after:) on a lazily started coroutine (Coroutine.current): it fires into a delay and rejects the promise; armed by a body that ends first, its timer does not keep the coroutine alive")
    func cancelAfterOnLazyCoroutine() async throws {
        let weak = Kit.WeakCoroutines()
        try await Kit.withScheduler("r12b-cancel-after") { s in
            let (fired, quick) = try await Coroutine.async(on: s) { () throws -> (String, String) in
                let start = ContinuousClock.now
                let fired = Coroutine.async { () throws -> Int in
                    let me = try #require(Coroutine.current)
                    weak.add(me)
                    me.cancel(after: .milliseconds(50))
                    try Coroutine.delay(.seconds(60))
                    return 1
                }
                let quick = Coroutine.async { () throws -> Int in
                    let me = try #require(Coroutine.current)
                    weak.add(me)
                    me.cancel(after: .seconds(600))   // released when the coroutine finishes
                    return 2
                }
                let a = Self.describe(Result { try fired.await() })
                let b = Self.describe(Result { try quick.await() })
                if ContinuousClock.now - start > .seconds(20) { return ("took \(ContinuousClock.now - start)", b) }
                return (a, b)
            }.value
            #expect(fired == "cancelled")
            #expect(quick == "value 2")
        }
        #expect(weak.count == 2)
        // A timer that kept `quick` would keep it for 600 s.
        #expect(await Kit.eventually(timeout: .seconds(20)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    // MARK: Promise.cancel() once the body started (the link made at start)

    @Test("Promise.cancel() from a sibling coroutine after a lazily created body started cancels its coroutine: the delay throws at once, onCancel runs once, the coroutine is freed",
          arguments: [false, true])
    func promiseCancelAfterStartReachesCoroutine(eager: Bool) async throws {
        let weak = Kit.WeakCoroutines()
        let cancelHandlers = Kit.Counter()
        let unwound = Kit.Counter()
        try await Kit.withScheduler("r12b-pcancel-started-\(eager)") { s in
            let outcome = try await Coroutine.async(on: s) { () throws -> String in
                let started = Promise<Void>()
                let p = Coroutine.async(name: eager ? "eager" : nil) { () throws -> Int in
                    defer { unwound.increment() }
                    if let c = Coroutine.current { weak.add(c) }
                    started.fulfill(())
                    try Coroutine.delay(.seconds(60))
                    return 1
                }
                p.onCancel { cancelHandlers.increment() }
                let canceller = Coroutine.async { () throws -> Void in
                    try started.await()
                    p.cancel()
                }
                try canceller.await()
                let start = ContinuousClock.now
                let r = Self.describe(Result { try p.await() })
                // The body must end by the cancellation, not by the 60 s delay.
                return ContinuousClock.now - start > .seconds(20) ? "took too long" : r
            }.value
            #expect(outcome == "cancelled")
            // The delay was interrupted: the body unwound (a 60 s delay would make this fail).
            #expect(await Kit.eventually(timeout: .seconds(20)) { unwound.value == 1 })
        }
        #expect(await Kit.eventually(timeout: .seconds(20)) { cancelHandlers.value == 1 })
        #expect(await Kit.eventually(timeout: .seconds(20)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
    }

    @Test("a lazily started body cancelling its own promise: the promise says cancelled, the next suspension throws, the body's later fulfil does not override")
    func bodyCancelsOwnPromise() async throws {
        try await Kit.run { () throws -> Void in
            let own = Kit.Box<Promise<Int>?>(nil)
            let afterCancel = Kit.Box<String>("not reached")
            let p = Coroutine.async { () throws -> Int in
                guard let me = own.value else { throw Boom() }   // set before the parent yields
                me.cancel()
                afterCancel.value = Coroutine.isActive ? "active" : "inactive"
                do { try Coroutine.yield() } catch is CancellationError {
                    afterCancel.value += ", yield threw"
                    return 7   // its fulfil must lose
                }
                return 8
            }
            own.value = p
            #expect(throws: CancellationError.self) { try p.await() }
            #expect(afterCancel.value == "inactive, yield threw")
        }
    }

    // MARK: Lock-step race of Promise.cancel() with the body's start

    @Test("Promise.cancel() from a plain thread, round by round, landing around the moment the body starts: each promise cancelled once (onCancel and observers once); a body that started is cancelled by the time cancel() returns; every body and coroutine released once")
    func lockStepCancelAtStart() async throws {
        let rounds = 1500
        try await Kit.withScheduler("r12b-lockstep") { s in
            let released = Kit.Counter()
            let weak = Kit.WeakCoroutines()
            let observed = Tally(rounds)
            let cancelHandlers = Tally(rounds)
            let cancelReturned = Atomic<Int>(-1)
            let plainSpin = Atomic<Int>(200)
            let escaped = Kit.Log<Int>()
            let yieldReturned = Kit.Log<Int>()
            let stuck = Kit.Log<Int>()
            let ranBody = Tally(rounds)
            let current = Kit.Box<Promise<Int>?>(nil)
            let published = DispatchSemaphore(value: 0)
            let cancelled = DispatchSemaphore(value: 0)
            let launcher = Coroutine.async(on: s) { () throws -> [String] in
                var results: [String] = []
                var spin = 0
                for i in 0..<rounds {
                    let tracker = Kit.Tracker(released)
                    let p = Coroutine.async { () throws -> Int in
                        withExtendedLifetime(tracker) {}
                        if i % 50 == 0, let c = Coroutine.current { weak.add(c) }
                        ranBody.bump(i)
                        // The body started, so its promise is still pending: this round's
                        // cancel() must win and, once it returned, this coroutine is cancelled
                        // (the promise linked it when the body started).
                        let deadline = ContinuousClock.now + .seconds(20)
                        while cancelReturned.load(ordering: .sequentiallyConsistent) < i {
                            if ContinuousClock.now > deadline { stuck.append(i); break }
                            ccoro_cpu_relax()
                        }
                        if Coroutine.isActive { escaped.append(i) }
                        try Coroutine.yield()
                        yieldReturned.append(i)
                        return i
                    }
                    _ = p.always { _ in observed.bump(i) }
                    p.onCancel { cancelHandlers.bump(i) }
                    current.value = p
                    published.signal()
                    // The plain thread spins a while, then cancels; this coroutine spins `spin`
                    // before it suspends and lets the launch start. `spin` follows the outcomes
                    // (cancelled before the start: spin less; after: spin more), so that the
                    // cancellations land around the body's start.
                    for _ in 0..<spin { ccoro_cpu_relax() }   // a C call: never optimised away
                    _ = try? p.await()
                    cancelled.wait()   // cancel() returned (a plain wait: at most a brief spin away)
                    results.append(Self.describe(p.result))
                    if ranBody.all[i] == 0 {
                        if spin == 0 { plainSpin.add(25, ordering: .relaxed) }   // too early even so
                        spin = max(0, spin - spin / 8 - 60)
                    } else {
                        spin = min(spin + spin / 8 + 40 + i % 3, 1_000_000)
                    }
                }
                return results
            }
            try await Kit.onPlainThread {
                for i in 0..<rounds {
                    published.wait()
                    guard let p = current.value else { continue }
                    for _ in 0..<plainSpin.load(ordering: .relaxed) + (i % 7) * 10 { ccoro_cpu_relax() }
                    p.cancel()
                    cancelReturned.store(i, ordering: .sequentiallyConsistent)
                    cancelled.signal()
                }
            }
            let results = try await launcher.value
            #expect(results.count == rounds)
            #expect(await Kit.eventually(timeout: .seconds(20)) { released.value == rounds }, "\(released.value) of \(rounds) bodies released")
            let ran = ranBody.all
            let kinds = ["body dropped": ran.filter { $0 == 0 }.count, "body ran": ran.filter { $0 == 1 }.count]
            #expect(results.allSatisfy { $0 == "cancelled" }, "\(results.enumerated().filter { $0.element != "cancelled" }.prefix(10))")
            #expect(ran.allSatisfy { $0 <= 1 }, "a body ran twice")
            #expect(stuck.all.isEmpty, "bodies never saw their round's cancel() return: \(stuck.all.prefix(10))")
            #expect(escaped.all.isEmpty, "bodies still active after their promise's cancel() returned: \(escaped.all.prefix(10))")
            #expect(yieldReturned.all.isEmpty, "a cancelled body's yield returned: \(yieldReturned.all.prefix(10))")
            #expect(await Kit.eventually(timeout: .seconds(20)) { observed.all.allSatisfy { $0 >= 1 } })
            _ = try await Kit.onSchedulerLoop(s) {}
            #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once")
            #expect(await Kit.eventually(timeout: .seconds(20)) { cancelHandlers.all.allSatisfy { $0 >= 1 } })
            #expect(cancelHandlers.all.allSatisfy { $0 == 1 }, "onCancel handlers not run exactly once")
            #expect(await Kit.eventually(timeout: .seconds(20)) { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            #expect(await Kit.eventually(timeout: .seconds(20)) { s.liveCount == 0 }, "liveCount \(s.liveCount)")
            print("Review12b lock-step outcomes: \(kinds)")
        }
    }

    // MARK: Parent cancelled while launches are pending: eager and lazy alike

    @Test("a parent cancelled by a sibling while 3,000 Coroutine.async children are pending: the same outcomes lazily and eagerly (rejected with CancellationError, observers once, onCancel never, bodies released once)",
          arguments: [false, true])
    func parentCancelledWhilePending(eager: Bool) async throws {
        let n = 3000
        let released = Kit.Counter()
        let ran = Kit.Counter()
        let observed = Tally(n)
        let cancelHandlers = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        try await Kit.withScheduler("r12b-parent-\(eager)") { s in
            let children = try await Coroutine.async(on: s) { () throws -> [Promise<Int>] in
                let box = Kit.Box<[Promise<Int>]>([])
                let queued = Promise<Void>()
                let parent = Coroutine.launch {
                    var ps: [Promise<Int>] = []
                    for i in 0..<n {
                        let tracker = Kit.Tracker(released)
                        let p = Coroutine.async(name: eager ? "eager-\(i)" : nil) { () throws -> Int in
                            withExtendedLifetime(tracker) {}
                            if let c = Coroutine.current { weak.add(c) }
                            ran.increment()
                            return i
                        }
                        _ = p.always { _ in observed.bump(i) }
                        p.onCancel { cancelHandlers.increment() }
                        ps.append(p)
                    }
                    box.value = ps
                    queued.fulfill(())
                    // The sibling runs only when this coroutine suspends: the children are all
                    // still queued behind it then.
                    try Coroutine.delay(.seconds(60))
                }
                let sibling = Coroutine.async { () throws -> Void in
                    try queued.await()
                    parent.cancel()
                }
                try sibling.await()
                try parent.join()
                return box.value
            }.value
            #expect(children.count == n)
            let outcomes = Set(children.map { Self.describe($0.result) })
            #expect(outcomes == ["cancelled"], "\(outcomes)")
        }
        #expect(ran.value == 0, "\(ran.value) bodies ran")
        #expect(released.value == n, "\(released.value) of \(n) bodies released")
        #expect(await Kit.eventually(timeout: .seconds(20)) { observed.all.allSatisfy { $0 >= 1 } })
        #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once")
        #expect(cancelHandlers.value == 0, "onCancel ran \(cancelHandlers.value) times: the promise was rejected, not cancelled")
        #expect(weak.count == 0)
    }
}
