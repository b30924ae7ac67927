import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias Tally = CoroutineTestKit.Tally

/// Schedulers stopped while other threads launch, cancel and wake: every coroutine finishes once,
/// every body is released once, every loop ends (<doc:BlockingAndStopping>).
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Schedulers stopped under races", .serialized)
struct SchedulerStressTests {
    /// Guards an invariant (the run queue holds no references to its coroutines).
    @Test("unstarted coroutines cancelled while queued, then the scheduler stopped: each finishes once and is freed")
    func unstartedCancelledThenStopped() async throws {
        for round in 0..<10 {
            let weak = Kit.WeakCoroutines()
            let released = Kit.Counter()
            let s = CoroutineScheduler(name: "stop-\(round)")
            let started = Promise<Void>()
            // A coroutine that keeps the run queue busy until the stop.
            weak.add(Coroutine.launch(on: s) {
                started.fulfill(())
                while true { try Coroutine.yield() }
            })
            try await started.value
            try await Kit.onPlainThreads(2) { k in
                for i in 0..<200 {
                    let t = Kit.Tracker(released)
                    let c = Coroutine.launch(on: s) {
                        _ = t
                        // Launch a child onto this scheduler (queued unstarted) and cancel it.
                        let child = Coroutine.launch { _ = t; try Coroutine.yield() }
                        if i % 2 == 0 { child.cancel() }
                        try Coroutine.yield()
                    }
                    if (i + k) % 3 == 0 { c.cancel() }
                    weak.add(c)
                }
            }
            s.stop()
            #expect(await Kit.eventually { s.isStopped })
            // The coroutines that never started are finished on the scheduler's thread right
            // after it closes (isStopped), so their release is awaited too.
            #expect(await Kit.eventually { released.value == 400 }, "round \(round): \(released.value) bodies released of 400")
            #expect(await Kit.eventually { weak.alive == 0 }, "round \(round): \(weak.alive) coroutines still alive")
        }
    }

    /// Guards an invariant (a coroutine that never runs borrows its scheduler and tells its
    /// unretained observers, a promise, channel or mailbox, exactly once).
    @Test("launches from two threads race a stop: every promise, channel and actor of a coroutine that never ran is told exactly once")
    func launchesRaceStop() async throws {
        for round in 0..<8 {
            let s = CoroutineScheduler(name: "race-stop-\(round)")
            let released = Kit.Counter()
            let ran = Kit.Counter()
            let results = Kit.Log<String>()
            let perThread = 150
            let go = Atomic<Int>(0)
            try await Kit.onPlainThreads(3) { t in
                _ = go.wrappingAdd(1, ordering: .relaxed)
                while go.load(ordering: .relaxed) < 3 {}
                if t == 2 {
                    for _ in 0..<(round * 500) { _ = Kit.opaque(0) }
                    s.stop()
                    return
                }
                for i in 0..<perThread {
                    let tr = Kit.Tracker(released)
                    switch i % 3 {
                    case 0:
                        let p = Coroutine.async(on: s) { () -> Int in _ = tr; ran.increment(); return i }
                        let r: Result<Int, any Error>
                        do { r = .success(try Coroutine.runBlocking { try p.await() }) } catch { r = .failure(error) }
                        results.append("async " + Kit.describe(r))
                    case 1:
                        let ch = Coroutine.produce(on: s) { (out: Channel<Int>) in _ = tr; ran.increment(); try out.send(i) }
                        let r: Result<Int, any Error>
                        do { r = .success(try Coroutine.runBlocking { try ch.receive() }) } catch { r = .failure(error) }
                        results.append("produce " + Kit.describe(r))
                    default:
                        let a = CoroutineActor<Int, Int>(on: s) { mailbox in _ = tr; ran.increment(); for e in mailbox { e.reply(e.message) } }
                        let reply = a.send(i)
                        let r: Result<Int, any Error>
                        do { r = .success(try Coroutine.runBlocking { try reply.await() }) } catch { r = .failure(error) }
                        results.append("actor " + (r.isSuccess ? "value" : "failed"))
                    }
                }
            }
            let all = results.all
            #expect(all.count == 2 * perThread)
            // A coroutine that ran gives its value (or is cancelled by the stop); one that never ran
            // reports the stop (or the cancellation of a main-style start).
            let unexpected = all.filter {
                !($0.hasPrefix("async value") || $0.hasPrefix("produce value") || $0 == "actor value"
                  || $0.hasSuffix("stopped") || $0.hasSuffix("cancelled") || $0 == "actor failed")
            }
            #expect(unexpected.isEmpty, "round \(round): \(unexpected.prefix(5))")
            #expect(await Kit.eventually { s.isStopped })
            #expect(await Kit.eventually { released.value == 2 * perThread }, "round \(round): \(released.value) released")
        }
    }

    /// Guards an invariant (`Coroutine.async` from a coroutine onto its own scheduler creates its
    /// coroutine only when the launch reaches the head of the run queue).
    @Test("stop() from a plain thread with thousands of Coroutine.async launches pending: each promise settles once, each body released once, nothing alive",
          arguments: [true, false])
    func stopWithThousandsPending(holdThread: Bool) async throws {
        let n = 5000
        let s = CoroutineScheduler(name: "stop-\(holdThread)")
        let released = Kit.Counter()
        let ran = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let observed = Tally(n)
        let promises = Kit.Box<[Promise<Int>]>([])
        let queued = DispatchSemaphore(value: 0)
        let stopCalled = Atomic<Bool>(false)
        Coroutine.launch(on: s) {
            if let c = Coroutine.current { weak.add(c) }
            var ps: [Promise<Int>] = []
            for i in 0..<n {
                let tracker = Kit.Tracker(released)
                let p = Coroutine.async { () throws -> Int in
                    withExtendedLifetime(tracker) {}
                    if let c = Coroutine.current { weak.add(c) }
                    ran.increment()
                    try Coroutine.yield()
                    return i
                }
                _ = p.always { _ in observed.bump(i) }
                ps.append(p)
            }
            promises.value = ps
            queued.signal()
            // Optionally hold the thread until the stop was requested: all n are still pending then.
            while holdThread && !stopCalled.load(ordering: .sequentiallyConsistent) { ccoro_cpu_relax() }
            for p in ps { _ = try? p.await() }
        }
        try await Kit.onPlainThread {
            queued.wait()
            s.stop()
            stopCalled.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(await Kit.eventually { s.isStopped })
        let all = promises.value
        #expect(all.count == n)
        var outcomes: [String: Int] = [:]
        for (i, p) in all.enumerated() {
            let d = Kit.describe(p.result)
            outcomes[d == "value \(i)" ? "value" : d, default: 0] += 1
        }
        #expect(Set(outcomes.keys).isSubset(of: ["value", "cancelled", "stopped"]), "\(outcomes)")
        #expect(await Kit.eventually { observed.total >= n })
        #expect(observed.all.allSatisfy { $0 == 1 }, "observers not run exactly once")
        #expect(released.value == n, "\(released.value) of \(n) bodies released")
        #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) coroutines alive")
        #expect(s.liveCount == 0)
        #expect(s.pendingLaunchCount.load(ordering: .relaxed) == 0)
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("coroutines launched onto a stopped scheduler finish, release their bodies once and are freed")
    func launchOntoStopped() async throws {
        let released = Kit.Counter()
        let weak = Kit.WeakCoroutines()
        let s = CoroutineScheduler(name: "stopped")
        s.stop()
        #expect(await Kit.eventually { s.isStopped })
        try await Kit.onPlainThreads(2) { _ in
            for _ in 0..<500 {
                let t = Kit.Tracker(released)
                let c = Coroutine.launch(on: s) { _ = t }
                weak.add(c)
                precondition(c.isFinished)
                precondition(c.error is CoroutineError)
            }
        }
        #expect(released.value == 1000)
        #expect(weak.alive == 0)
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("launches racing with stop: every coroutine finishes once, bodies are released once, nothing leaks")
    func launchRacingStop() async throws {
        for round in 0..<20 {
            let released = Kit.Counter()
            let ran = Kit.Counter()
            let weak = Kit.WeakCoroutines()
            let s = CoroutineScheduler(name: "racing-stop-\(round)")
            let launched = Promise<Void>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await Kit.onPlainThreads(2) { k in
                        for i in 0..<300 {
                            let t = Kit.Tracker(released)
                            let c = Coroutine.launch(on: s) {
                                _ = t
                                ran.increment()
                                try Coroutine.yield()
                                try Coroutine.delay(.milliseconds(1))
                            }
                            weak.add(c)
                            if i == 50 && k == 0 { launched.fulfill(()) }
                            if i % 7 == 0 { c.cancel() }
                        }
                    }
                }
                group.addTask {
                    try await launched.value
                    s.stop()
                }
                try await group.waitForAll()
            }
            #expect(await Kit.eventually { s.isStopped })
            #expect(await Kit.eventually { released.value == 600 }, "round \(round): \(released.value) bodies released of 600")
            #expect(await Kit.eventually { weak.alive == 0 }, "round \(round): \(weak.alive) coroutines still alive")
            #expect(ran.value <= 600, "round \(round): \(ran.value) bodies ran for 600 launches")
        }
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("launches onto a scheduler that is stopping never keep its loop parked: it stops every time")
    func launchesDuringStopLetTheLoopEnd() async throws {
        // admit() registers a coroutine, then sees the stop request and finishes it on the
        // launching thread. A loop that saw it registered used to park with nothing to wake it
        // (once its idle spins had stopped paying off, as under load).
        var stuck: [String] = []
        for round in 0..<50 {
            let s = CoroutineScheduler(name: "stopping-\(round)")
            let idled = Kit.Counter(), launching = Kit.Counter()
            let done = Kit.Box(false)
            _ = Coroutine.launch(on: s) {
                // Idle gaps with nobody posting: the loop stops spinning before it parks.
                for _ in 0..<5 { try Coroutine.delay(.milliseconds(1)) }
                idled.increment()
                do { try Coroutine.delay(hangBound) } catch {}   // until stop cancels it
                // End once launches are under way: the loop's next look at its live count
                // then races with their register-then-finish.
                while launching.value < 2 {}
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while idled.value == 0 { await Task.yield() }
                    s.stop()
                    try await Kit.onPlainThreads(2) { _ in
                        var first = true
                        while !done.value {
                            _ = Coroutine.launch(on: s) {}
                            if first { first = false; launching.increment() }
                        }
                    }
                }
                group.addTask {
                    defer { done.value = true }
                    while launching.value < 2 { await Task.yield() }
                    if !(await Kit.eventually { s.isStopped }) { throw StuckLoop() }
                }
                do { try await group.waitForAll() } catch is StuckLoop { stuck.append(s.name) }
            }
        }
        #expect(stuck.isEmpty, "schedulers whose loop never ended: \(stuck)")
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("stop cancels suspended coroutines that have joiners (coroutines, tasks) and cancel timers")
    func stopWithJoinersAndTimers() async throws {
        for round in 0..<10 {
            let victim = CoroutineScheduler(name: "victim-\(round)")
            let joinersDone = Kit.Counter()
            let started = WaitGroup()
            started.add(50)
            var victims: [Coroutine] = []
            for _ in 0..<50 {
                let c = Coroutine.launch(on: victim) {
                    started.done()
                    let ch = Channel<Int>()
                    _ = try ch.receive()   // forever, until cancelled
                }
                c.cancel(after: hangBound)
                victims.append(c)
            }
            let list = victims
            victims = []
            try await Kit.withScheduler("joiners") { j in
                let js = (0..<50).map { i in
                    Coroutine.launch(on: j) {
                        try list[i].join()
                        joinersDone.increment()
                    }
                }
                try await Kit.run { try started.wait() }
                async let taskJoins: Void = {
                    for c in list { try await c.join() }
                }()
                victim.stop()
                try await taskJoins
                try await Kit.run { for c in js { try c.join() } }
            }
            #expect(joinersDone.value == 50)
            #expect(list.allSatisfy { $0.isFinished && $0.error is CancellationError })
            #expect(await Kit.eventually { victim.isStopped })
        }
    }

    /// From the lifetime tests written against the registry's single `Unmanaged` reference per
    /// coroutine, the borrowed running coroutine (`withCurrent`) and the borrowed scheduler in
    /// `wake`.
    @Test("a dedicated scheduler whose last handle is dropped is woken from plain threads as it stops")
    func wakeRacingSchedulerRelease() async throws {
        for _ in 0..<200 {
            let ch = Channel<Int>(capacity: 1)
            let done = Promise<Void>()
            let started = Promise<Void>()
            do {
                let s = CoroutineScheduler(name: "drop")
                Coroutine.launch(on: s) {
                    started.fulfill(())
                    _ = try? ch.receive()
                    done.fulfill(())
                }
                try await started.value
                s.stop()   // cancels the receiver; meanwhile a plain thread sends
            }
            try await Kit.onPlainThread { _ = try? ch.send(1) }
            try await done.value
        }
    }
}

/// Thrown when a stopped scheduler's loop did not end.
private struct StuckLoop: Error {}

extension Result {
    fileprivate var isSuccess: Bool { if case .success = self { true } else { false } }
}
