import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

/// The incoming queue of a scheduler (``WakeUpQueue``): wake-ups, launches and jobs from other
/// threads reach the scheduler once each, in the order each thread posted them, and a post that
/// races with the scheduler's close is either taken in or refused (the "incoming queue" of
/// <doc:ThreadsSchedulersAndCoroutines>, and <doc:BlockingAndStopping>). The heavy races are in
/// ``WakeUpQueueStressTests``.
@Suite("Wake-up queue", .serialized)
struct WakeUpQueueTests {
    // MARK: The queue alone

    @Test("a bare queue hands back coroutines and jobs oldest first, and only a push into an empty queue asks for a wake-up")
    func bareQueueOrder() {
        let q = WakeUpQueue()
        let coroutines = (0..<3).map { _ in WakeUpTestKit.idleCoroutine() }
        let ran = Kit.Log<Int>()
        let emptyAtFirst = !q.hasEntries
        #expect(emptyAtFirst)
        #expect(WakeUpTestKit.outcome(q.push(.coroutine(.passUnretained(coroutines[0])))) == "into empty")
        #expect(WakeUpTestKit.outcome(q.push(.job(.passRetained(IncomingJob { ran.append(1) })))) == "accepted")
        #expect(WakeUpTestKit.outcome(q.push(.coroutine(.passUnretained(coroutines[1])))) == "accepted")
        #expect(WakeUpTestKit.outcome(q.push(.job(.passRetained(IncomingJob { ran.append(3) })))) == "accepted")
        #expect(WakeUpTestKit.outcome(q.push(.coroutine(.passUnretained(coroutines[2])))) == "accepted")
        let holds = q.hasEntries && q.hasEntriesOrdered
        #expect(holds)

        #expect(WakeUpTestKit.takeAll(q, coroutines) == ["c0", "job", "c1", "job", "c2"])
        #expect(ran.all == [1, 3])
        let emptied = !q.hasEntries
        #expect(emptied)
        // Taken off, each coroutine's link says so, and it can be queued again.
        #expect(coroutines.allSatisfy { $0.wakeUpLink == WakeUpQueue.notQueued })
        #expect(WakeUpTestKit.outcome(q.push(.coroutine(.passUnretained(coroutines[1])))) == "into empty")
        #expect(WakeUpTestKit.takeAll(q, coroutines) == ["c1"])
    }

    @Test("a closed queue refuses every push and hands back what it held, once")
    func closedQueueRefuses() {
        let q = WakeUpQueue()
        let c = WakeUpTestKit.idleCoroutine()
        let released = Kit.Counter()
        let ran = Kit.Log<Int>()
        let tracker = Kit.Tracker(released)
        _ = q.push(.coroutine(.passUnretained(c)))
        _ = q.push(.job(.passRetained(IncomingJob { _ = tracker; ran.append(1) })))
        var leftovers: [String] = []
        q.close { entry in
            switch entry {
            case .coroutine(let u): leftovers.append(u.takeUnretainedValue() === c ? "c" : "other")
            case .job(let node): node.takeRetainedValue().run(); leftovers.append("job")
            }
        }
        #expect(leftovers == ["c", "job"])
        #expect(ran.all == [1])
        let closedAndEmpty = q.isClosed && !q.hasEntries
        #expect(closedAndEmpty)
        #expect(c.wakeUpLink == WakeUpQueue.notQueued)

        // Refused: nothing is queued, the caller keeps its job.
        #expect(WakeUpTestKit.outcome(q.push(.coroutine(.passUnretained(c)))) == "refused")
        let refused = Unmanaged.passRetained(IncomingJob { ran.append(2) })
        #expect(WakeUpTestKit.outcome(q.push(.job(refused))) == "refused")
        refused.release()
        var again = 0
        q.close { _ in again += 1 }
        q.takeAll { _ in again += 1 }
        #expect(again == 0)
        #expect(ran.all == [1])
        let stillClosed = q.isClosed
        #expect(stillClosed)
    }

    // MARK: Through a scheduler

    @Test("post after a dedicated scheduler stopped returns false; execute then runs the job on a pool scheduler")
    func postAfterClose() async throws {
        let s = CoroutineScheduler(name: "wakeup-closed")
        s.stop()
        #expect(await Kit.eventually { s.isStopped })
        #expect(!s.post(.job {}))
        let c = Coroutine(scheduler: s, name: nil, stackSize: nil, reportsUnobservedErrors: false,
                          unstartedObserver: nil, body: {})
        #expect(!s.post(.coroutine(c)))
        #expect(c.wakeUpLink == WakeUpQueue.notQueued)
        let ranOn = Promise<String>()
        s.execute { ranOn.fulfill(CoroutineScheduler.current?.name ?? "no scheduler") }
        let name = try await ranOn.value
        #expect(name != s.name && name != "no scheduler")
    }

    @Test("many plain threads waking coroutines on one scheduler: each coroutine runs once, and each thread's wake-ups run in the order it made them")
    func manyProducersWakeInOrder() async throws {
        try await WakeUpTestKit.wakeFromProducers(name: "wakeup-fifo", producers: 4, perProducer: 250)
    }

    @Test("jobs posted from plain threads run once each on the loop, in each thread's order")
    func jobsKeepOrder() async throws {
        try await WakeUpTestKit.jobsFromProducers(name: "wakeup-jobs", producers: 4, perProducer: 2_000)
    }

    @Test("a parked scheduler is woken by a wake-up from another thread, and by each of many in a row")
    func parkedSchedulerWakes() async throws {
        try await Kit.withScheduler("wakeup-parked") { s in
            let watchdog = Kit.startWatchdog(limit: hangBound, "wakeup-parked", waking: Kit.Box<CoroutineScheduler?>(s))
            defer { watchdog.cancel() }
            for round in 0..<5 {
                let p = Promise<Int>()
                let woken = Coroutine.async(on: s) { try p.await() + 1 }
                // Parked: no signal tells that a loop went to sleep, so the flag is polled.
                let parked = await Kit.eventually { s.lifecycle.load().isParked }
                #expect(parked)
                try await Kit.onPlainThread { p.fulfill(round) } as Void
                #expect(try await woken.value == round + 1)
            }
        }
    }

    @Test("jobs and launches from plain threads race a stop: every job runs once, every coroutine runs or finishes as stopped")
    func postsRaceStop() async throws {
        try await WakeUpTestKit.postsRaceStop(name: "wakeup-close", rounds: 12, perThread: 60)
    }
}

/// Helpers of the wake-up queue tests (shared with ``WakeUpQueueStressTests``).
enum WakeUpTestKit {
    /// A coroutine object that is never launched: a bare queue entry.
    static func idleCoroutine() -> Coroutine {
        Coroutine(scheduler: .main, name: nil, stackSize: nil, reportsUnobservedErrors: false,
                  unstartedObserver: nil, body: {})
    }

    /// Whether `values` is exactly `start, start + 1, …` (`count` of them).
    static func isRun(_ values: [Int], from start: Int, count: Int) -> Bool {
        values.count == count && values.enumerated().allSatisfy { $1 == start + $0 }
    }

    /// Where `values` first departs from `start, start + 1, …`, for a failure message (the
    /// lists are too long to print whole).
    static func firstMisfit(_ values: [Int], from start: Int) -> String {
        guard let i = values.indices.first(where: { values[$0] != start + $0 }) else {
            return "\(values.count) values, none out of place"
        }
        return "at \(i) of \(values.count): \(values[i...].prefix(8)) instead of \(start + i)…"
    }

    static func outcome(_ o: WakeUpQueue.PushOutcome) -> String {
        switch o {
        case .refused: "refused"
        case .acceptedIntoEmpty: "into empty"
        case .accepted: "accepted"
        }
    }

    /// Takes everything off `q`, oldest first: "c<i>" for `coroutines[i]`, "job" for a job
    /// (which is run).
    static func takeAll(_ q: borrowing WakeUpQueue, _ coroutines: [Coroutine]) -> [String] {
        var out: [String] = []
        q.takeAll { entry in
            switch entry {
            case .coroutine(let u):
                let c = u.takeUnretainedValue()
                out.append("c\(coroutines.firstIndex { $0 === c } ?? -1)")
            case .job(let node):
                node.takeRetainedValue().run()
                out.append("job")
            }
        }
        return out
    }

    /// `producers` plain threads each fulfil `perProducer` promises, in order, on which as many
    /// coroutines of one dedicated scheduler are suspended. Checks that every coroutine ran
    /// once, saw the value its producer wrote before waking it, and that the coroutines woken by
    /// one producer ran in the order it woke them.
    static func wakeFromProducers(name: String, producers: Int, perProducer: Int) async throws {
        let n = producers * perProducer
        try await Kit.withScheduler(name) { s in
            let watchdog = Kit.startWatchdog(limit: hangBound, name, waking: Kit.Box<CoroutineScheduler?>(s))
            defer { watchdog.cancel() }
            let promises = (0..<n).map { _ in Promise<Void>() }
            // Written by the producer before the wake-up, plainly; read by the woken coroutine.
            let payload = PlainSlots(n)
            let ranOrder = Kit.Log<Int>()
            let entered = Kit.Counter()
            let finished = Kit.Counter()
            let allSuspended = Promise<Void>()
            let allFinished = Promise<Void>()
            Coroutine.launch(on: s) {
                for k in 0..<n {
                    Coroutine.launch {
                        entered.increment()
                        try promises[k].await()   // suspends: nobody has fulfilled it yet
                        ranOrder.append(payload[k])
                        if finished.increment() == n { allFinished.fulfill(()) }
                    }
                }
                // On this thread: once every waiter has counted itself it has also suspended.
                while entered.value < n { try Coroutine.yield() }
                allSuspended.fulfill(())
            }
            try await allSuspended.value
            try await Kit.onPlainThreads(producers) { p in
                for i in 0..<perProducer {
                    let k = p * perProducer + i
                    payload[k] = k
                    promises[k].fulfill(())
                }
            }
            try await allFinished.value
            let order = ranOrder.all
            #expect(order.count == n)
            #expect(Set(order) == Set(0..<n), "lost or duplicated wake-ups")
            for p in 0..<producers {
                let mine = order.filter { $0 / perProducer == p }
                #expect(WakeUpTestKit.isRun(mine, from: p * perProducer, count: perProducer),
                        "producer \(p)'s wake-ups ran out of order: \(WakeUpTestKit.firstMisfit(mine, from: p * perProducer))")
            }
        }
    }

    /// `producers` plain threads each post `perProducer` jobs to one dedicated scheduler. Checks
    /// that each job ran once, on the scheduler's thread, and those of one thread in its order.
    static func jobsFromProducers(name: String, producers: Int, perProducer: Int) async throws {
        let n = producers * perProducer
        try await Kit.withScheduler(name) { s in
            let watchdog = Kit.startWatchdog(limit: hangBound, name, waking: Kit.Box<CoroutineScheduler?>(s))
            defer { watchdog.cancel() }
            let order = Kit.Log<Int>()
            let payload = PlainSlots(n)
            let offThread = Kit.Counter()
            try await Kit.onPlainThreads(producers) { p in
                for i in 0..<perProducer {
                    let k = p * perProducer + i
                    let slot = PlainSlots(1)
                    slot[0] = k   // plain write before the post, read by the job on the loop
                    s.execute {
                        if CoroutineScheduler.current !== s { offThread.increment() }
                        payload[k] = slot[0]
                        order.append(k)
                    }
                }
            }
            // Posted after every producer's jobs (the threads have ended): it runs after them.
            let last = Promise<Void>()
            s.execute { last.fulfill(()) }
            try await last.value
            let all = order.all
            #expect(all.count == n)
            #expect(offThread.value == 0)
            #expect(Set(all) == Set(0..<n), "lost or duplicated jobs")
            #expect((0..<n).allSatisfy { payload[$0] == $0 })
            for p in 0..<producers {
                let mine = all.filter { $0 / perProducer == p }
                #expect(WakeUpTestKit.isRun(mine, from: p * perProducer, count: perProducer),
                        "producer \(p)'s jobs ran out of order: \(WakeUpTestKit.firstMisfit(mine, from: p * perProducer))")
            }
        }
    }

    /// Two plain threads post jobs and launch coroutines onto a dedicated scheduler while a third
    /// stops it, at an offset that varies with the round. Every job must run exactly once (on the
    /// scheduler, by its close, or on a pool scheduler after a refused post); every coroutine
    /// must run its body or finish as stopped or cancelled — none may be lost or hang.
    static func postsRaceStop(name: String, rounds: Int, perThread: Int) async throws {
        for round in 0..<rounds {
            let s = CoroutineScheduler(name: "\(name)-\(round)")
            let watchdog = Kit.startWatchdog(limit: hangBound, "\(name) round \(round)", waking: Kit.Box<CoroutineScheduler?>(s))
            defer { watchdog.cancel() }
            let jobRuns = Kit.Tally(2 * perThread)
            let jobsDone = (0..<2 * perThread).map { _ in Promise<Void>() }
            let launched = Kit.Log<Promise<Int>>()
            let go = Atomic<Int>(0)
            try await Kit.onPlainThreads(3) { t in
                _ = go.wrappingAdd(1, ordering: .relaxed)
                while go.load(ordering: .relaxed) < 3 {}
                if t == 2 {
                    jitter(round &* 29)
                    s.stop()
                    return
                }
                for i in 0..<perThread {
                    let id = t * perThread + i
                    s.execute {
                        jobRuns.bump(id)
                        jobsDone[id].fulfill(())
                    }
                    launched.append(Coroutine.async(on: s) { id })
                }
            }
            for p in jobsDone { try await p.value }
            var outcomes: [String: Int] = [:]
            for p in launched.all {
                let d = Kit.describe(await p.valueResult)
                outcomes[d.hasPrefix("value") ? "value" : d, default: 0] += 1
            }
            #expect(outcomes.values.reduce(0, +) == 2 * perThread)
            #expect(Set(outcomes.keys).isSubset(of: ["value", "stopped", "cancelled"]), "round \(round): \(outcomes)")
            #expect(await Kit.eventually { s.isStopped })
            #expect(jobRuns.all.allSatisfy { $0 == 1 }, "round \(round): a job ran twice")
            #expect(!s.post(.job {}))
        }
    }
}

/// Integers written and read without synchronisation of their own: whatever orders the writes
/// before the reads (the queue) must be seen by ThreadSanitizer.
final class PlainSlots: @unchecked Sendable {
    private let storage: UnsafeMutableBufferPointer<Int>
    init(_ n: Int) {
        storage = .allocate(capacity: n)
        storage.initialize(repeating: -1)
    }
    deinit { storage.deallocate() }
    subscript(i: Int) -> Int {
        get { storage[i] }
        set { storage[i] = newValue }
    }
}
