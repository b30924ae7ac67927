import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

private struct Boom: Error, Equatable { var code: Int }

/// Joining, errors kept in `error`, and unobserved errors: see the CoroutineLifecycle article
/// (<doc:CoroutineLifecycle>).
@Suite("Joining coroutines")
struct CoroutineJoinTests {
    @Test("every one of several joiners is woken, in the order they joined, when the target throws")
    func manyJoiners() async throws {
        let log = Kit.Log<String>()
        try await Kit.run {
            // Given a target that throws after a short delay, and four coroutines joining it.
            let target = Coroutine.launch {
                try Coroutine.delay(.milliseconds(5))
                log.append("target throws")
                throw Boom(code: 1)
            }
            let joiners = (1...4).map { i in
                Coroutine.launch {
                    try target.join()
                    log.append("j\(i) woke, target.error=\(String(describing: target.error))")
                }
            }
            // When the body waits for the joiners.
            for j in joiners { try j.join() }
            // Then each joiner returned normally (none rethrew the target's error).
            for j in joiners where j.error != nil { log.append("joiner failed: \(j.error!)") }
        }
        let e = String(describing: Boom(code: 1) as (any Error)?)
        #expect(log.all == ["target throws"] + (1...4).map { "j\($0) woke, target.error=\(e)" })
    }

    @Test("joiners on other schedulers and in Swift tasks are all woken")
    func crossThreadJoiners() async throws {
        try await Kit.withScheduler("join-target") { target in
            try await Kit.withScheduler("join-waiters") { waiters in
                let gate = Promise<Void>()
                let t = Coroutine.launch(on: target) { try gate.await() }
                let woke = Kit.Counter()
                let coroutineJoiners = (0..<3).map { _ in
                    Coroutine.launch(on: waiters) { try t.join(); woke.increment() }
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<3 { group.addTask { try await t.join(); woke.increment() } }
                    group.addTask { for j in coroutineJoiners { try await j.join() } }
                    // Registration has no public signal: watch the target's joiner list.
                    #expect(await Kit.eventually { t.withShared { $0.joiners.count } == 6 })
                    gate.fulfill(())
                    try await group.waitForAll()
                }
                #expect(woke.value == 6)
                #expect(coroutineJoiners.allSatisfy { $0.error == nil })
            }
        }
    }

    @Test("join of a finished coroutine returns at once")
    func joinFinished() async throws {
        let order = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let c = Coroutine.launch { log.append("c") }
            try c.join()
            let other = Coroutine.launch { log.append("other") }
            // c is finished: this join must not suspend, so `other` cannot run before "joined again".
            try c.join()
            log.append("joined again")
            try other.join()
            return log.all
        }
        #expect(order == ["c", "joined again", "other"])
    }

    @Test("error holds exactly what the body threw")
    func errorIsKept() async throws {
        try await Kit.withScheduler("join-error") { s in
            let c = Coroutine.launch(on: s) { throw Boom(code: 42) }
            try await c.join()
            #expect(c.error as? Boom == Boom(code: 42))
            #expect(c.isFinished)
        }
    }

    @Test("join from async code returns normally when the target threw")
    func asyncJoinDoesNotRethrow() async throws {
        try await Kit.withScheduler("join-async") { s in
            let c = Coroutine.launch(on: s) {
                try Coroutine.delay(.milliseconds(1))
                throw Boom(code: 3)
            }
            try await c.join()
            #expect(c.error as? Boom == Boom(code: 3))
        }
    }

    @Test("cancelling a task waiting in join removes its waiter and throws CancellationError")
    func asyncJoinCancelled() async throws {
        try await Kit.withScheduler("join-async-cancel") { s in
            let gate = Promise<Void>()
            let c = Coroutine.launch(on: s) { try gate.await() }
            let waiter = Task { try await c.join() }
            #expect(await Kit.eventually { c.withShared { $0.joiners.count } == 1 })
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            #expect(c.withShared { $0.joiners.count } == 0)
            #expect(!c.isCancelled)
            gate.fulfill(())
            try await c.join()
            #expect(c.error == nil)
        }
    }
}

/// The global `unobservedErrorHandler` (<doc:CoroutineLifecycle>). Serialized because the handler
/// is global; each test counts only calls for its own coroutines (other suites may run meanwhile).
@Suite("Unobserved errors", .serialized)
struct UnobservedErrorTests {
    /// Installs a handler recording calls for coroutines whose name starts with `prefix`, runs
    /// `body`, restores the previous handler and returns the recorded calls.
    private func recordingUnobserved(prefix: String,
                                     _ body: () async throws -> Void) async rethrows -> [(String, any Error)] {
        let calls = Kit.Log<UncheckedPair>()
        let previous = Coroutine.unobservedErrorHandler
        Coroutine.unobservedErrorHandler = { c, e in
            if let name = c.name, name.hasPrefix(prefix) { calls.append(UncheckedPair(name: name, error: e)) }
            else { previous(c, e) }
        }
        defer { Coroutine.unobservedErrorHandler = previous }
        try await body()
        return calls.all.map { ($0.name, $0.error) }
    }

    private struct UncheckedPair: @unchecked Sendable { let name: String; let error: any Error }

    @Test("an error of an un-joined launch is reported exactly once")
    func reportedOnce() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-once") {
            try await Kit.run {
                _ = Coroutine.launch(name: "unobserved-once") { throw Boom(code: 9) }
            }
            // Coroutine.run returns once its scheduler drained, including the handler's job.
        }
        try #require(calls.count == 1)
        #expect(calls[0].0 == "unobserved-once")
        #expect(calls[0].1 as? Boom == Boom(code: 9))
    }

    @Test("the handler runs on the coroutine's scheduler thread, outside any coroutine")
    func handlerContext() async throws {
        let seen = Kit.Box<(Bool, Bool)?>(nil)
        let previous = Coroutine.unobservedErrorHandler
        let done = Promise<Void>()
        Coroutine.unobservedErrorHandler = { c, e in
            guard c.name == "unobserved-context" else { return previous(c, e) }
            seen.value = (CoroutineScheduler.current === c.scheduler, Coroutine.current == nil)
            done.fulfill(())
        }
        defer { Coroutine.unobservedErrorHandler = previous }
        try await Kit.withScheduler("unobserved-context") { s in
            Coroutine.launch(on: s, name: "unobserved-context") { throw Boom(code: 1) }
            try await done.value
        }
        let (onScheduler, outsideCoroutine) = try #require(seen.value)
        #expect(onScheduler)
        #expect(outsideCoroutine)
    }

    @Test("CancellationError is not reported")
    func cancellationNotReported() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-cancel") {
            try await Kit.run {
                Coroutine.launch(name: "unobserved-cancel-thrown") { throw CancellationError() }
                let c = Coroutine.launch(name: "unobserved-cancel-cancelled") { try Coroutine.delay(.seconds(30)) }
                try Coroutine.yield()
                c.cancel()
                let unstarted = Coroutine.launch(name: "unobserved-cancel-unstarted") {}
                unstarted.cancel()
            }
        }
        #expect(calls.isEmpty)
    }

    @Test("an error is not reported when a coroutine is joining")
    func joinedNotReported() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-joined") {
            try await Kit.run {
                let c = Coroutine.launch(name: "unobserved-joined") { throw Boom(code: 2) }
                try c.join()
            }
        }
        #expect(calls.isEmpty)
    }

    @Test("an error is not reported when a Swift task is joining")
    func asyncJoinedNotReported() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-task-joined") {
            try await Kit.withScheduler("unobserved-task-joined") { s in
                let gate = Promise<Void>()
                let c = Coroutine.launch(on: s, name: "unobserved-task-joined") {
                    try gate.await()
                    throw Boom(code: 4)
                }
                async let joined: Void = c.join()
                #expect(await Kit.eventually { c.withShared { $0.joiners.count } == 1 })
                gate.fulfill(())
                try await joined
                // Flush the scheduler so a (wrong) report would have run.
                _ = try await Kit.onSchedulerLoop(s) {}
            }
        }
        #expect(calls.isEmpty)
    }

    @Test("errors of Coroutine.async are not reported (they reject the promise)")
    func asyncNotReported() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-async") {
            try await Kit.run {
                _ = Coroutine.async(name: "unobserved-async") { () -> Int in throw Boom(code: 5) }
            }
        }
        #expect(calls.isEmpty)
    }
}
