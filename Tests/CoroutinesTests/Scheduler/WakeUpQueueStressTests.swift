import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

/// The incoming queue (``WakeUpQueue``) under load: many threads push while its consumer takes,
/// wake-ups race the loop's parking, posts race the scheduler's close. Nothing may be lost or
/// duplicated, each thread's posts come out in its order, and ThreadSanitizer must see every
/// hand-off (the payloads are plain memory). See ``WakeUpQueueTests`` for the single cases.
///
/// Serialized: each test loads the machine on its own (threads, stacks and, under ThreadSanitizer,
/// mappings). .ci/run runs the stress suites apart from the others under ThreadSanitizer.
@Suite("Wake-up queue under load", .serialized)
struct WakeUpQueueStressTests {
    @Test("four threads push 20,000 jobs each into a bare queue while a fifth takes: none lost or taken twice, each thread's in its order, every payload seen")
    func bareQueueManyProducers() async throws {
        let producers = 4, perProducer = 20_000
        let total = producers * perProducer
        let box = QueueBox()
        let received = PlainSlots(total)   // the consumer's alone
        let count = PlainSlots(1)
        count[0] = 0
        let hung = Atomic<Bool>(false)
        try await Kit.onPlainThreads(producers + 1) { t in
            if t == producers {
                // The consumer: takes until everything arrived (or a hang is declared).
                let deadline = ContinuousClock.now + .seconds(120)
                while count[0] < total {
                    box.queue.takeAll { entry in
                        guard case .job(let node) = entry else { return }
                        node.takeRetainedValue().run()
                    }
                    if ContinuousClock.now > deadline { hung.store(true, ordering: .relaxed); return }
                }
                return
            }
            for i in 0..<perProducer {
                let value = PlainSlots(1)
                let node = IncomingJob {
                    received[count[0]] = value[0]
                    count[0] += 1
                }
                value[0] = t * perProducer + i   // plain, after the node exists, before the push
                if i % 97 == 0 { jitter(i) }
                _ = box.queue.push(.job(.passRetained(node)))
            }
        }
        let didHang = hung.load(ordering: .relaxed)
        #expect(!didHang, "the consumer did not receive everything: \(count[0]) of \(total)")
        let all = (0..<count[0]).map { received[$0] }
        #expect(all.count == total)
        #expect(Set(all).count == total, "a job was taken twice or lost")
        for p in 0..<producers {
            let mine = all.filter { $0 / perProducer == p }
            #expect(WakeUpTestKit.isRun(mine, from: p * perProducer, count: perProducer),
                    "producer \(p) out of order: \(WakeUpTestKit.firstMisfit(mine, from: p * perProducer))")
        }
        let leftOver = box.queue.hasEntries
        #expect(!leftOver)
    }

    @Test("four threads wake 1,000 coroutines of one scheduler, ten times: each runs once, each thread's wake-ups in its order")
    func manyProducersWakeRepeatedly() async throws {
        for round in 0..<10 {
            try await WakeUpTestKit.wakeFromProducers(name: "wakeup-fifo-\(round)", producers: 4, perProducer: 250)
        }
    }

    @Test("four threads post 50,000 jobs each to one scheduler: each runs once on its loop, each thread's in its order")
    func manyProducersJobs() async throws {
        try await WakeUpTestKit.jobsFromProducers(name: "wakeup-jobs-heavy", producers: 4, perProducer: 50_000)
    }

    @Test("jobs and launches from two threads race a stop, 150 times: every job runs once, every coroutine runs or finishes as stopped")
    func postsRaceStopRepeatedly() async throws {
        try await WakeUpTestKit.postsRaceStop(name: "wakeup-close-heavy", rounds: 150, perThread: 100)
    }

    @Test("2,000 wake-ups, one at a time, after delays from none to past the idle spin: the loop, spinning or parked, is woken every time")
    func wakeUpsRaceParking() async throws {
        try await Kit.withScheduler("wakeup-park-race") { s in
            let n = 2_000
            let promises = (0..<n).map { _ in Promise<Int>() }
            let ack = DispatchSemaphore(value: 0)
            let seen = Kit.Log<Int>()
            let waiter = Coroutine.launch(on: s) {
                for k in 0..<n {
                    seen.append(try promises[k].await())
                    ack.signal()
                }
            }
            let lost = try await Kit.onPlainThread { () -> Int? in
                for k in 0..<n {
                    // Delays around the 20 µs idle spin: the wake-up meets the loop spinning,
                    // announcing that it parks, or parked.
                    switch k % 4 {
                    case 0: break
                    case 1: jitter(k)
                    case 2: spin(microseconds: 5 + k % 30)
                    default: spin(microseconds: 25 + k % 40)
                    }
                    promises[k].fulfill(k)
                    if ack.wait(timeout: .now() + 30) == .timedOut { return k }
                }
                return nil
            }
            #expect(lost == nil, "wake-up \(lost ?? -1) was lost: \(Kit.liveReport(on: s))")
            if lost == nil {
                try await waiter.join()
                #expect(seen.all == Array(0..<n))
            }
        }
    }

    @Test("wake-ups and jobs from three threads reach a scheduler whose own coroutines keep its run queue busy")
    func wakeUpsWhileBusy() async throws {
        try await Kit.withScheduler("wakeup-busy") { s in
            let watchdog = Kit.startWatchdog(limit: hangBound, "wakeup-busy", waking: Kit.Box<CoroutineScheduler?>(s))
            defer { watchdog.cancel() }
            let producers = 3, perProducer = 300
            let n = producers * perProducer
            let stopSpinning = Atomic<Bool>(false)
            let spinners = (0..<2).map { _ in
                Coroutine.launch(on: s) {
                    while !stopSpinning.load(ordering: .relaxed) { try Coroutine.yield() }
                }
            }
            let promises = (0..<n).map { _ in Promise<Int>() }
            let woken = promises.map { p in Coroutine.async(on: s) { try p.await() } }
            let jobs = Kit.Log<Int>()
            try await Kit.onPlainThreads(producers) { t in
                for i in 0..<perProducer {
                    let k = t * perProducer + i
                    promises[k].fulfill(k)
                    s.execute { jobs.append(k) }
                }
            }
            for (k, w) in woken.enumerated() { #expect(try await w.value == k) }
            let last = Promise<Void>()
            s.execute { last.fulfill(()) }
            try await last.value
            stopSpinning.store(true, ordering: .relaxed)
            for c in spinners { try await c.join() }
            let all = jobs.all
            #expect(Set(all) == Set(0..<n) && all.count == n)
            for t in 0..<producers {
                let mine = all.filter { $0 / perProducer == t }
                #expect(WakeUpTestKit.isRun(mine, from: t * perProducer, count: perProducer),
                        "thread \(t)'s jobs out of order: \(WakeUpTestKit.firstMisfit(mine, from: t * perProducer))")
            }
        }
    }
}

/// A bare ``WakeUpQueue`` shared by the threads of a test.
private final class QueueBox: @unchecked Sendable {
    let queue = WakeUpQueue()
}
