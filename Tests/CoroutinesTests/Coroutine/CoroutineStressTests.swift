import CCoroutines
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// Coroutines under races and at scale: launches, cancellation, joins and lifetimes across
/// threads, and tens of thousands of launches (<doc:CoroutineLifecycle>, <doc:Cancellation>).
///
/// Serialized, like every stress suite: each test loads the machine on its own (threads, stacks and,
/// under ThreadSanitizer, mappings). .ci/run runs the stress suites apart from the others under
/// ThreadSanitizer.
@Suite("Coroutines under races and at scale", .serialized)
struct CoroutineStressTests {
    // MARK: Lifetimes

    /// Found in review 10 (the run queue holds no references to its coroutines).
    @Test("handles dropped at once: yields, direct switches and finishes interleave; every coroutine freed")
    func droppedHandlesYieldAndFinish() async throws {
        let weak = Kit.WeakCoroutines()
        let finished = Kit.Counter()
        try await Kit.run {
            let ch = Channel<Int>()
            for i in 0..<300 {
                // The handle is dropped here: only the registry keeps the coroutine alive.
                weak.add(Coroutine.launch {
                    for _ in 0..<(i % 5) { try Coroutine.yield() }
                    if i % 3 == 0 {
                        try ch.send(i)
                    } else if i % 3 == 1 {
                        _ = try ch.receive()
                    }
                    // Children launched, queued unstarted, some cancelled at once, handles dropped.
                    if i % 7 == 0 {
                        let child = Coroutine.launch { try Coroutine.yield(); finished.increment() }
                        if i % 14 == 0 { child.cancel() }
                    }
                    finished.increment()
                })
            }
        }
        // i % 3 == 0: 100 senders, i % 3 == 1: 100 receivers: all paired.
        #expect(finished.value == 300 + (0..<300).filter { $0 % 7 == 0 && $0 % 14 != 0 }.count)
        #expect(weak.count == 300)
        #expect(weak.alive == 0)
    }

    // MARK: Cancellation of parents and children

    /// Found in review 11 (parent and child links are guarded by a spin lock, without reference
    /// counting).
    @Test("a parent cancelled from a plain thread while it launches children onto two schedulers and they finish: all children end, the list empties")
    func parentCancelRacesLaunches() async throws {
        try await ChannelTestKit.withSchedulers(2, "r11-pc") { s in
            let weak = Kit.WeakCoroutines()
            for round in 0..<40 {
                let launched = Kit.Counter()
                let childPromises = Kit.Log<Promise<Int>>()
                let started = Promise<Void>()
                let parent = Coroutine.launch(on: s[round % 2]) {
                    started.fulfill(())
                    var i = 0
                    while !Coroutine.current!.isCancelled {
                        let target = s[i % 2]
                        let k = i
                        if k % 2 == 0 {
                            childPromises.append(Coroutine.async(on: target) { () throws -> Int in
                                if k % 3 == 0 { try Coroutine.yield() }
                                return k
                            })
                        } else {
                            weak.add(Coroutine.launch(on: target) {
                                // Grandchildren, so that cancel walks two levels while they unlink.
                                let g = Coroutine.launch { try Coroutine.yield() }
                                if k % 5 == 0 { try g.join() }
                            })
                        }
                        launched.increment()
                        i += 1
                        if i % 16 == 0 { try? Coroutine.yield() }
                        if i > 5_000 { break }
                    }
                }
                weak.add(parent)
                try await started.value
                try await Kit.onPlainThread {
                    for _ in 0..<((round % 8) * 2_000) { _ = Kit.opaque(0) }
                    parent.cancel()
                }
                try await parent.join()
                for p in childPromises.all {
                    let d = Kit.describe(await p.valueResult)
                    #expect(d == "cancelled" || d.hasPrefix("value "), "round \(round): \(d)")
                }
                #expect(await Kit.eventually { parent.withShared { $0.firstChild == nil } }, "round \(round): children still linked")
                // Every even launch was an async child whose promise was collected above.
                #expect(childPromises.all.count == (launched.value + 1) / 2, "round \(round)")
            }
            #expect(await Kit.eventually { weak.alive == 0 }, "\(weak.alive) of \(weak.count) alive")
        }
    }

    /// Found in review 11 (parent and child links are guarded by a spin lock, without reference
    /// counting).
    @Test("cancel of a parent from many threads at once while children launched on other schedulers unlink: no child missed, none freed early")
    func concurrentCancelsWalkChildren() async throws {
        try await ChannelTestKit.withSchedulers(3, "r11-cc") { s in
            for round in 0..<20 {
                let gate = Promise<Void>()
                let ready = WaitGroup()
                let endedCancelled = Kit.Counter()
                let n = 60
                ready.add(n)
                let parent = Coroutine.launch(on: s[0]) {
                    for i in 0..<n {
                        Coroutine.launch(on: s[1 + i % 2]) {
                            ready.done()
                            do {
                                if i % 3 == 0 { return }   // finishes (unlinks) while the cancels walk
                                try gate.await()
                            } catch is CancellationError { endedCancelled.increment() }
                        }
                    }
                    do { try gate.await() } catch {}
                }
                try await Kit.onPlainThread { try Coroutine.runBlocking { try ready.wait() } }
                try await Kit.onPlainThreads(3) { _ in parent.cancel() }
                try await parent.join()
                let expected = (0..<n).filter { $0 % 3 != 0 }.count
                #expect(await Kit.eventually { endedCancelled.value == expected }, "round \(round): \(endedCancelled.value) of \(expected)")
                #expect(await Kit.eventually { parent.withShared { $0.firstChild == nil } })
                gate.fulfill(())
            }
        }
    }

    // MARK: Observers and joins racing the finish

    /// Found in review 11 (a coroutine finishes without reference counting while others observe
    /// it).
    @Test("isFinished, error, dumpAll and joins from coroutines and tasks race the finish: consistent answers, every join returns")
    func observersRaceFinish() async throws {
        try await ChannelTestKit.withSchedulers(2, "r11-obs") { s in
            let stop = Atomic<Bool>(false)
            let dumps = Kit.Counter()
            // dumpAll from a plain thread the whole time (walks registries under the spin lock).
            let dumper = Task.detached {
                try await Kit.onPlainThread {
                    while !stop.load(ordering: .relaxed) {
                        let d = Coroutine.dumpAll()
                        if !d.isEmpty { dumps.increment() }
                    }
                }
            }
            let inconsistent = Kit.Log<String>()
            let n = 400
            let coroutines = (0..<n).map { i in
                Coroutine.launch(on: s[i % 2], name: "r11-obs-\(i)") {
                    if i % 2 == 0 { try Coroutine.yield() }
                    if i % 25 == 0 { throw Kit.NumberedBoom(n: i) }   // reported as unobserved: keep them few
                }
            }
            // Pollers: once isFinished is true, error is final.
            try await Kit.onPlainThreads(2) { t in
                for (i, c) in coroutines.enumerated() where i % 2 == t {
                    while !c.isFinished { _ = c.error }
                    let e = c.error
                    let ok = i % 25 == 0 ? (e as? Kit.NumberedBoom) == Kit.NumberedBoom(n: i) : e == nil
                    if !ok { inconsistent.append("\(i): \(String(describing: e))") }
                }
            }
            // Joiners: coroutines on both schedulers and tasks, after or during the finish.
            let joiners = (0..<n).map { i in
                Coroutine.launch(on: s[(i + 1) % 2]) { try coroutines[i].join() }
            }
            try await withThrowingTaskGroup(of: Void.self) { g in
                for c in coroutines.prefix(100) { g.addTask { try await c.join() } }
                try await g.waitForAll()
            }
            for j in joiners { try await j.join(); #expect(j.error == nil) }
            stop.store(true, ordering: .relaxed)
            try await dumper.value
            #expect(inconsistent.all.isEmpty, "\(inconsistent.all.prefix(5))")
            #expect(dumps.value > 0)
        }
    }

    /// Found in review 11 (a coroutine finishes without reference counting while others observe
    /// it).
    @Test("joins of Coroutine.async promises and of launched coroutines from a plain thread race the finish on a busy scheduler")
    func promiseAwaitRacesFinishFromThreads() async throws {
        try await ChannelTestKit.withSchedulers(2, "r11-paf") { s in
            let wrong = Kit.Counter()
            try await Kit.onPlainThreads(2) { t in
                do {
                    try Coroutine.runBlocking {
                        for i in 0..<800 {
                            let p = Coroutine.async(on: s[(i + t) % 2]) { i * 2 }
                            let c = Coroutine.launch(on: s[(i + t + 1) % 2]) { if i % 2 == 0 { try Coroutine.yield() } }
                            // Half read after a spin (settled: the fast path), half at once (wait).
                            if i % 2 == 1 { for _ in 0..<200 { _ = Kit.opaque(0) } }
                            if try p.await() != i * 2 { wrong.increment() }
                            try c.join()
                            if !c.isFinished || c.error != nil { wrong.increment() }
                        }
                    }
                } catch {
                    wrong.increment()
                }
            }
            #expect(wrong.value == 0)
        }
    }
}
