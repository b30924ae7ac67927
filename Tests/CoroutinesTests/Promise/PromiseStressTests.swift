import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias Tally = CoroutineTestKit.Tally

/// A set of indices shared between threads.
private final class Indices: Sendable {
    private let set = Mutex<Set<Int>>([])
    func insert(_ i: Int) { set.locked { _ = $0.insert(i) } }
    func contains(_ i: Int) -> Bool { set.locked { $0.contains(i) } }
}

/// Promises under races: `cancel()` from other threads while their `Coroutine.async` coroutines
/// start, suspend or finish, and awaiters cancelled while other threads settle and query the
/// promise (<doc:Promises>).
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Promises under races", .serialized)
struct PromiseStressTests {
    // MARK: Promise.cancel racing the coroutine of Coroutine.async

    /// Guards an invariant (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("Coroutine.async promises cancelled from plain threads while their coroutines finish: each settles once, every coroutine freed")
    func asyncCancelRacesFinish() async throws {
        try await ChannelTestKit.withSchedulers(2, "acf") { s in
            let weak = Kit.WeakCoroutines()
            let bad = Kit.Log<String>()
            let ran = Kit.Counter()
            let perThread = 1500
            try await Kit.onPlainThreads(2) { t in
                // Thread 0 launches from a plain thread (no parent) and waits with a semaphore;
                // thread 1 from inside a runBlocking coroutine (the launches are its children).
                func round(_ i: Int, wait: (Promise<Int>) -> Result<Int, any Error>) {
                    let p = Coroutine.async(on: s[(i + t) % 2]) { () throws -> Int in
                        if let c = Coroutine.current { weak.add(c) }
                        ran.increment()
                        if i % 3 == 1 { try Coroutine.yield() }
                        if i % 5 == 4 { throw Kit.NumberedBoom(n: i) }
                        return i
                    }
                    // Cancel at a varying moment: at once, after a spin, or never.
                    if i % 4 != 3 {
                        for _ in 0..<(i % 7) * 40 { _ = Kit.opaque(0) }
                        p.cancel()
                    }
                    let d = Kit.describe(wait(p))
                    let ok = d == "cancelled" || d == "value \(i)" || d == "boom \(i)"
                    if !ok || (i % 4 == 3 && d == "cancelled") { bad.append("\(i): \(d)") }
                    if p.isPending { bad.append("\(i): pending after wait") }
                }
                if t == 0 {
                    for i in 0..<perThread {
                        round(i) { p in
                            let sem = DispatchSemaphore(value: 0)
                            _ = p.always { _ in sem.signal() }
                            sem.wait()
                            return p.result!
                        }
                    }
                } else {
                    try? Coroutine.runBlocking {
                        for i in 0..<perThread {
                            round(i) { p in Result { try p.await() } }
                        }
                    }
                }
            }
            #expect(bad.all.isEmpty, "\(bad.all.prefix(5))")
            #expect(ran.value <= 2 * perThread)
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines of \(weak.count) alive")
        }
    }

    /// Guards an invariant (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("Coroutine.async cancelled before it starts (queued behind a busy coroutine): the body never runs, the promise says cancelled")
    func asyncCancelledBeforeStart() async throws {
        try await Kit.withScheduler("acbs") { s in
            for round in 0..<5 {
                let release = Atomic<Bool>(false)
                let busy = Promise<Void>()
                // Occupies the scheduler's thread without suspending, so that what is launched
                // meanwhile stays queued unstarted.
                let blocker = Coroutine.launch(on: s) {
                    busy.fulfill(())
                    while !release.load(ordering: .acquiring) { _ = Kit.opaque(0) }
                }
                try await busy.value
                let ran = Kit.Counter()
                let released = Kit.Counter()
                var promises: [Promise<Int>] = []
                for i in 0..<200 {
                    let t = Kit.Tracker(released)
                    promises.append(Coroutine.async(on: s) { _ = t; ran.increment(); return i })
                }
                for (i, p) in promises.enumerated() where i % 2 == 0 { p.cancel() }
                release.store(true, ordering: .releasing)
                try await blocker.join()
                var outcomes: [String] = []
                for p in promises { outcomes.append(Kit.describe(await p.valueResult)) }
                for (i, d) in outcomes.enumerated() {
                    #expect(d == (i % 2 == 0 ? "cancelled" : "value \(i)"), "round \(round), \(i): \(d)")
                }
                #expect(ran.value == 100, "round \(round): \(ran.value) bodies ran")
                promises = []
                #expect(await Kit.eventually { released.value == 200 }, "round \(round): \(released.value) bodies released")
            }
        }
    }

    /// Guards an invariant (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("Coroutine.async suspended in its body, its promise cancelled from another thread: the body sees the cancellation, all freed")
    func asyncCancelWhileSuspended() async throws {
        try await ChannelTestKit.withSchedulers(2, "acws") { s in
            let weak = Kit.WeakCoroutines()
            let sawCancel = Kit.Counter()
            let gate = Promise<Void>()
            let started = WaitGroup()
            let n = 300
            started.add(n)
            var promises: [Promise<Int>] = []
            for i in 0..<n {
                promises.append(Coroutine.async(on: s[i % 2]) { () throws -> Int in
                    if let c = Coroutine.current { weak.add(c) }
                    started.done()
                    do { try gate.await() } catch { sawCancel.increment(); throw error }
                    return i
                })
            }
            try await Kit.onPlainThread { try Coroutine.runBlocking { try started.wait() } }
            let cancelled = promises
            try await Kit.onPlainThreads(2) { t in
                for (i, p) in cancelled.enumerated() where i % 2 == t { p.cancel() }
            }
            for p in promises { #expect(Kit.describe(await p.valueResult) == "cancelled") }
            promises = []
            #expect(await Kit.eventually { sawCancel.value == n }, "\(sawCancel.value) of \(n) bodies saw the cancellation")
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            gate.fulfill(())
        }
    }

    // MARK: Promise.cancel racing the start of a lazily created coroutine

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("Promise.cancel from a plain thread racing materialization: each promise settles once, observers run once, no body escapes a cancel() that returned, all released")
    func promiseCancelRacesMaterialization() async throws {
        try await Kit.withScheduler("pcancel") { s in
            let n = 3000, batch = 50
            let released = Kit.Counter()
            let weak = Kit.WeakCoroutines()
            let cancelReturned = Indices()
            let escaped = Kit.Log<Int>()
            let observed = Tally(n)
            let batches = Kit.Log<[Promise<Int>]>()
            let published = DispatchSemaphore(value: 0)
            let launcher = Coroutine.async(on: s) { () throws -> [Promise<Int>] in
                var all: [Promise<Int>] = []
                for b in 0..<(n / batch) {
                    var ps: [Promise<Int>] = []
                    for j in 0..<batch {
                        let i = b * batch + j
                        let tracker = Kit.Tracker(released)
                        let p = Coroutine.async { () throws -> Int in
                            withExtendedLifetime(tracker) {}
                            if let c = Coroutine.current { weak.add(c) }
                            if cancelReturned.contains(i) && Coroutine.isActive { escaped.append(i) }
                            if i % 3 == 0 { try Coroutine.yield() }
                            return i
                        }
                        _ = p.always { _ in observed.bump(i) }
                        ps.append(p)
                    }
                    batches.append(ps)
                    published.signal()
                    all += ps
                    if b % 2 == 0 { try Coroutine.yield() }
                }
                for p in all { _ = try? p.await() }
                return all
            }
            try await Kit.onPlainThread {
                for b in 0..<(n / batch) {
                    published.wait()
                    for (j, p) in batches.all[b].enumerated() {
                        let i = b * batch + j
                        guard i % 4 != 3 else { continue }
                        for _ in 0..<((i % 7) * 30) { _ = Kit.opaque(0) }
                        p.cancel()
                        cancelReturned.insert(i)
                    }
                }
            }
            let all = try await launcher.value
            #expect(all.count == n)
            var bad: [String] = []
            for (i, p) in all.enumerated() {
                let d = Kit.describe(p.result)
                if d != "value \(i)" && !(i % 4 != 3 && d == "cancelled") { bad.append("\(i): \(d)") }
            }
            #expect(bad.isEmpty, "\(bad.prefix(10))")
            #expect(escaped.all.isEmpty, "bodies running uncancelled after their promise's cancel() returned: \(escaped.all.prefix(10))")
            #expect(await Kit.eventually { observed.total >= n })
            _ = try await Kit.onSchedulerLoop(s) {}   // observers queued late would have run by now
            #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once: \(observed.all.enumerated().filter { $0.element != 1 }.prefix(10))")
            #expect(await Kit.eventually { released.value == n }, "\(released.value) of \(n) bodies released")
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            #expect(await Kit.eventually { s.liveCount == 0 }, "liveCount \(s.liveCount)")
        }
    }

    /// Guards an invariant (a lazily created `Coroutine.async` coroutine links its promise only
    /// when its body starts).
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
                    results.append(Kit.describe(p.result))
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
            #expect(await Kit.eventually { released.value == rounds }, "\(released.value) of \(rounds) bodies released")
            let ran = ranBody.all
            let kinds = ["body dropped": ran.filter { $0 == 0 }.count, "body ran": ran.filter { $0 == 1 }.count]
            #expect(results.allSatisfy { $0 == "cancelled" }, "\(results.enumerated().filter { $0.element != "cancelled" }.prefix(10))")
            #expect(ran.allSatisfy { $0 <= 1 }, "a body ran twice")
            #expect(stuck.all.isEmpty, "bodies never saw their round's cancel() return: \(stuck.all.prefix(10))")
            #expect(escaped.all.isEmpty, "bodies still active after their promise's cancel() returned: \(escaped.all.prefix(10))")
            #expect(yieldReturned.all.isEmpty, "a cancelled body's yield returned: \(yieldReturned.all.prefix(10))")
            #expect(await Kit.eventually { observed.all.allSatisfy { $0 >= 1 } })
            _ = try await Kit.onSchedulerLoop(s) {}
            #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once")
            #expect(await Kit.eventually { cancelHandlers.all.allSatisfy { $0 >= 1 } })
            #expect(cancelHandlers.all.allSatisfy { $0 == 1 }, "onCancel handlers not run exactly once")
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
            #expect(await Kit.eventually { s.liveCount == 0 }, "liveCount \(s.liveCount)")
            print("Promise.cancel lock-step outcomes: \(kinds)")
        }
    }

    // MARK: Awaiters racing settlement, cancellation and queries

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("a promise awaited by many coroutines on two schedulers, half cancelled while it is fulfilled")
    func promiseAwaitRacingCancel() async throws {
        let a = CoroutineScheduler(name: "await-a")
        let b = CoroutineScheduler(name: "await-b")
        defer { a.stop(); b.stop() }
        for round in 0..<50 {
            let p = Promise<String>()
            let registered = WaitGroup()
            registered.add(40)
            let outcomes = Kit.Log<String>()
            let cs = (0..<40).map { i in
                Coroutine.launch(on: i % 2 == 0 ? a : b) {
                    registered.done()
                    do { outcomes.append(try p.await()) } catch is CancellationError { outcomes.append("cancelled") }
                }
            }
            try await Kit.run { try registered.wait() }
            try await Kit.onPlainThreads(2) { k in
                if k == 0 { p.fulfill("value \(round) with a heap-allocated string payload") }
                else { for c in cs where c.hashValue & 1 == 0 { c.cancel() } }
            }
            try await Kit.run { for c in cs { try c.join() } }
            let all = outcomes.all
            #expect(all.count == 40)
            #expect(all.allSatisfy { $0 == "cancelled" || $0 == "value \(round) with a heap-allocated string payload" })
        }
    }

    @Test("tasks awaiting a promise's value are cancelled from a plain thread (some before they wait) while it is fulfilled, rejected by a coroutine or cancelled: each task ends once, those not cancelled with the outcome, and no waiter entry is left")
    func taskAwaitersCancelledWhileSettled() async throws {
        let s = CoroutineScheduler(name: "task-await-race")
        defer { s.stop() }
        var cancelledGotOutcome = 0, cancelledGotCancellation = 0
        for round in 0..<60 {
            let p = Promise<Int>()
            // Given 32 tasks waiting for the promise, an observer, and 16 tasks that may not wait yet
            let waiting = (0..<32).map { _ in Task { try await p.value } }
            try await waitUntil("32 tasks wait") { p.testWaiterCount == 32 }
            let observed = p.then { $0 }
            let late = (0..<16).map { _ in Task { try await p.value } }
            let cancelled = late + waiting.enumerated().filter { $0.offset.isMultiple(of: 2) }.map(\.element)
            let kept = waiting.enumerated().filter { !$0.offset.isMultiple(of: 2) }.map(\.element)
            let settled = Promise<Void>()
            // When one plain thread settles it (or has a coroutine on s reject it) while another
            // cancels half of the waiting tasks and all of the late ones
            try await Kit.onPlainThreads(2) { k in
                if k == 0 {
                    switch round % 3 {
                    case 0: p.fulfill(round); settled.fulfill(())
                    case 1: Coroutine.launch(on: s) { p.reject(PromiseTestError.code(round)); settled.fulfill(()) }
                    default: p.cancel(); settled.fulfill(())
                    }
                } else {
                    for t in cancelled.reversed() { t.cancel() }
                }
            }
            try await settled.value
            // Then every task ends with the outcome or, if cancelled, CancellationError (a task
            // resumed twice would trap), the observer saw the outcome, and nothing is left behind
            func describe(_ r: Result<Int, any Error>) -> String {
                switch r {
                case .success(let v): "value \(v)"
                case .failure(let e as PromiseTestError): "\(e)"
                case .failure(let e): "\(type(of: e))"
                }
            }
            let outcome = switch round % 3 {
            case 0: "value \(round)"
            case 1: "\(PromiseTestError.code(round))"
            default: "CancellationError"
            }
            for t in kept { #expect(describe(await t.result) == outcome, "round \(round)") }
            for t in cancelled {
                let got = describe(await t.result)
                #expect(got == outcome || got == "CancellationError", "round \(round): \(got)")
                if got == outcome && outcome != "CancellationError" { cancelledGotOutcome += 1 } else { cancelledGotCancellation += 1 }
            }
            try await waitUntil("the observer ran, round \(round)") { !observed.isPending }
            #expect(observed.result.map(describe) == outcome, "round \(round)")
            #expect(p.testOtherEntries.layout == "" && p.testOtherEntries.withdrawnTasks == 0, "round \(round)")
        }
        print("task awaiters cancelled while settled: \(cancelledGotOutcome) got the outcome, \(cancelledGotCancellation) CancellationError")
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("a woken awaiter reads the outcome while other threads query and observe the promise (TSan: no race)")
    func promiseAwaitRacingQueries() async throws {
        let a = CoroutineScheduler(name: "query-a")
        defer { a.stop() }
        for round in 0..<100 {
            let p = Promise<String>()
            let registered = Promise<Void>()
            let awaiter = Coroutine.async(on: a) { () -> String in
                registered.fulfill(())
                return try p.await()
            }
            try await registered.value
            let observed = Kit.Counter()
            try await Kit.onPlainThreads(2) { k in
                if k == 0 {
                    p.fulfill("round \(round) " + String(repeating: "z", count: 32))
                } else {
                    // Queries and registrations that take the promise's lock while the woken
                    // awaiter reads the outcome.
                    for _ in 0..<200 {
                        _ = p.isPending
                        _ = p.result
                        p.onCancel {}
                    }
                    _ = p.then { _ in observed.increment() }
                }
            }
            #expect(try await awaiter.value == "round \(round) " + String(repeating: "z", count: 32))
        }
    }
}
