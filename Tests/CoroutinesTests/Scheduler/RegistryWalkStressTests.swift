import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

/// The walks that hold a spin lock in chunks (`CoroutineScheduler+Registry.swift`,
/// `Coroutine.cancel`): entries unlinked between two chunks — even the one the walk would visit
/// next — never end or derail the walk, and every entry that stays linked is visited once.
///
/// Serialized: each test runs thousands of coroutines on two threads of its own.
@Suite("Registry and child-list walks in chunks, under races", .serialized)
struct RegistryWalkStressTests {
    /// Releases the coroutine that `cursor()` names (one of `coroutines`, each waiting for its
    /// promise in `releases`), then waits until it has unlinked, which moves the cursor on.
    /// Returns its index, or nil when there is no cursor.
    private static func finishCursor(_ cursor: () -> Unmanaged<Coroutine>?, among coroutines: [Coroutine],
                                     _ releases: [Promise<Void>]) -> Int? {
        guard let at = cursor()?.toOpaque(),
              let i = coroutines.firstIndex(where: { Unmanaged.passUnretained($0).toOpaque() == at }) else { return nil }
        releases[i].fulfill(())
        let deadline = ContinuousClock.now + .seconds(60)   // a hang bound only
        while cursor()?.toOpaque() == at && ContinuousClock.now < deadline { sched_yield() }
        return i
    }

    @Test("a registry walk whose next entry finishes between two chunks goes on from the entry after it")
    func registryWalkCursorMovesOn() async throws {
        let s = CoroutineScheduler(name: "walk-cursor")
        defer { s.stop() }
        // Given ten coroutines, each waiting for a release of its own
        let releases = (0..<10).map { _ in Promise<Void>() }
        let coroutines = releases.map { r in Coroutine.launch(on: s) { try r.await() } }
        _ = try await Kit.onSchedulerLoop(s) {}
        // When a walk in chunks of two finishes, between every two chunks, the entry it would
        // visit next
        let (listed, finished) = try await Kit.onPlainThread { () -> ([Int], [Int]) in
            var finished: [Int] = []
            let listed = s.liveCoroutines(chunk: 2) {
                if let i = Self.finishCursor({ s.withRegistry { $0.walkCursor } }, among: coroutines, releases) {
                    finished.append(i)
                }
            }
            return (listed.compactMap { c in coroutines.firstIndex { $0 === c } }, finished)
        }
        // Then it lists exactly the others: none finished, none left out (newest first: 9…0)
        #expect(finished == [7, 4, 1])
        #expect(listed == [9, 8, 6, 5, 3, 2, 0])
        for r in releases { r.fulfill(()) }
    }

    @Test("cancel's walk of the children whose next child finishes between two chunks goes on from the child after it")
    func childWalkCursorMovesOn() async throws {
        let parentScheduler = CoroutineScheduler(name: "walk-parent")
        let childScheduler = CoroutineScheduler(name: "walk-children")
        defer {
            parentScheduler.stop()
            childScheduler.stop()
        }
        // Given a parent with ten children on another scheduler, each waiting for a release
        let releases = (0..<10).map { _ in Promise<Void>() }
        let gate = Promise<Void>()
        let launched = Promise<[Coroutine]>()
        let parent = Coroutine.launch(on: parentScheduler) {
            launched.fulfill(releases.map { r in Coroutine.launch(on: childScheduler) { try r.await() } })
            try gate.await()
        }
        let children = try await launched.value
        _ = try await Kit.onSchedulerLoop(childScheduler) {}
        // When the walk in chunks of two finishes, between every two chunks, the child it
        // would visit next
        let (listed, finished) = try await Kit.onPlainThread { () -> ([Int], [Int]) in
            var finished: [Int] = []
            var collected: [Coroutine] = []
            parent.collectChildren(into: &collected, chunk: 2) {
                if let i = Self.finishCursor({ parent.withShared { $0.cancelCursor } }, among: children, releases) {
                    finished.append(i)
                }
            }
            return (collected.compactMap { c in children.firstIndex { $0 === c } }, finished)
        }
        // Then it collects exactly the others (newest first: 9…0)
        #expect(finished == [7, 4, 1])
        #expect(listed == [9, 8, 6, 5, 3, 2, 0])
        for r in releases { r.fulfill(()) }
        gate.fulfill(())
        try await parent.join()
    }

    @Test("a registry walk lists every coroutine that stays live, once, while others finish and launch during it")
    func registryWalkWhileCoroutinesFinish() async throws {
        let s = CoroutineScheduler(name: "walked")
        defer { s.stop() }
        let gate = Promise<Void>()
        // Given 2,000 coroutines that stay suspended, and 4,000 that finish one by one
        let stayers = (0..<2_000).map { _ in Coroutine.launch(on: s) { try gate.await() } }
        let releases = (0..<4_000).map { _ in Promise<Void>() }
        for r in releases { Coroutine.launch(on: s) { try r.await() } }
        _ = try await Kit.onSchedulerLoop(s) {}   // all have started and suspended
        let stayerIDs = Set(stayers.map(ObjectIdentifier.init))
        let finishing = Atomic<Bool>(true)
        let walks = Kit.Log<String>()
        // When one thread walks the registry again and again while another releases the
        // others (they finish, and unlink, on the scheduler's thread) and launches new ones
        try await Kit.onPlainThreads(2) { k in
            if k == 0 {
                var round = 0
                while finishing.load(ordering: .acquiring) || round < 5 {
                    let listed = s.liveCoroutines().map(ObjectIdentifier.init)
                    let missing = stayerIDs.subtracting(listed).count
                    let duplicates = listed.count - Set(listed).count
                    if missing != 0 || duplicates != 0 {
                        walks.append("walk \(round): \(missing) missing, \(duplicates) listed twice")
                    }
                    round += 1
                }
            } else {
                for (i, r) in releases.enumerated() {
                    r.fulfill(())
                    if i % 4 == 0 { Coroutine.launch(on: s) {} }
                }
                finishing.store(false, ordering: .releasing)
            }
        }
        // Then every walk listed every coroutine that stayed live, once
        #expect(walks.all.isEmpty, "\(walks.all.prefix(5))")
        gate.fulfill(())
        for c in stayers { try await c.join() }
        #expect(await Kit.eventually { s.liveCount == 0 })
    }

    @Test("cancelling a parent with thousands of children cancels every child that is still running, while others finish during the walk")
    func cancelReachesEveryChildWhileOthersFinish() async throws {
        let parentScheduler = CoroutineScheduler(name: "parent")
        let childScheduler = CoroutineScheduler(name: "children")
        defer {
            parentScheduler.stop()
            childScheduler.stop()
        }
        for round in 0..<5 {
            let gate = Promise<Void>()   // never opened: a child ends only by cancellation
            let releases = (0..<3_000).map { _ in Promise<Void>() }
            let launched = Promise<[Coroutine]>()
            // Given a parent with 6,000 children on another scheduler: 3,000 wait for the gate,
            // 3,000 for a release each
            let parent = Coroutine.launch(on: parentScheduler) {
                var children: [Coroutine] = []
                for r in releases {
                    children.append(Coroutine.launch(on: childScheduler) { try gate.await() })
                    children.append(Coroutine.launch(on: childScheduler) { try r.await() })
                }
                launched.fulfill(children)
                try gate.await()
            }
            let children = try await launched.value
            _ = try await Kit.onSchedulerLoop(childScheduler) {}   // all have suspended
            // When one thread cancels the parent while another releases half the children
            try await Kit.onPlainThreads(2) { k in
                if k == 0 { parent.cancel() } else { for r in releases { r.fulfill(()) } }
            }
            // Then every gate waiter was cancelled and has finished (the gate never opens, so a
            // child the walk missed would wait for ever), and the parent too
            for (i, c) in children.enumerated() where i % 2 == 0 {
                try await c.join()
                #expect(c.isCancelled, "round \(round), child \(i)")
            }
            try await parent.join()
            #expect(parent.isCancelled)
        }
    }
}
