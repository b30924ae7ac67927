import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Promises under races: `cancel()` from other threads while their `Coroutine.async` coroutines
/// start, suspend or finish, and awaiters cancelled while other threads settle and query the
/// promise (<doc:Promises>).
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("Promises under races", .serialized)
struct PromiseStressTests {
    // MARK: Promise.cancel racing the coroutine of Coroutine.async

    /// Found in review 11 (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("Coroutine.async promises cancelled from plain threads while their coroutines finish: each settles once, every coroutine freed")
    func asyncCancelRacesFinish() async throws {
        try await ChannelTestKit.withSchedulers(2, "r11-acf") { s in
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

    /// Found in review 11 (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("Coroutine.async cancelled before it starts (queued behind a busy coroutine): the body never runs, the promise says cancelled")
    func asyncCancelledBeforeStart() async throws {
        try await Kit.withScheduler("r11-acbs") { s in
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

    /// Found in review 11 (`Promise.cancel` reaches the coroutine of a `Coroutine.async` through an
    /// unretained link, and the await of a settled promise takes a fast path).
    @Test("Coroutine.async suspended in its body, its promise cancelled from another thread: the body sees the cancellation, all freed")
    func asyncCancelWhileSuspended() async throws {
        try await ChannelTestKit.withSchedulers(2, "r11-acws") { s in
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
}
