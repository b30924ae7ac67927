import Foundation
import Synchronization
import Testing
@testable import Coroutines

private typealias Kit = CoroutineTestKit

private struct Boom: Error, Equatable { var code: Int }

/// Joining, and errors kept in `error`: see the CoroutineLifecycle article (<doc:CoroutineLifecycle>).
/// Unobserved errors are in UnobservedErrorTests.swift.
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

    @Test("joiners on two schedulers and in tasks, cancelled from another thread while the target finishes, each either return normally or throw CancellationError, and none hangs")
    func cancellationsRaceTheFinish() async throws {
        try await Kit.withScheduler("join-race-a") { a in
            try await Kit.withScheduler("join-race-b") { b in
                for round in 0..<60 {
                    let gate = Promise<Void>()
                    let target = Coroutine.launch(on: a) {
                        try gate.await()
                        jitter(round &* 13)
                        throw Kit.Boom()
                    }
                    // Given 60 coroutine joiners on two schedulers and 4 task joiners
                    let joiners = (0..<60).map { i in Coroutine.async(on: i % 2 == 0 ? a : b) { try target.join() } }
                    let tasks = (0..<4).map { _ in Task { try await target.join() } }
                    // When the target is released, and two thirds of the joiners are cancelled meanwhile
                    gate.fulfill(())
                    jitter(round)
                    for (i, j) in joiners.enumerated() where i % 3 != 0 { j.cancel() }
                    for (i, t) in tasks.enumerated() where i % 2 == 0 { t.cancel() }
                    // Then each joiner returns or throws CancellationError, and the others return
                    for (i, j) in joiners.enumerated() {
                        do { try await j.value } catch is CancellationError {
                            #expect(i % 3 != 0, "joiner \(i) (not cancelled) threw CancellationError")
                        }
                    }
                    for (i, t) in tasks.enumerated() {
                        do { try await t.value } catch is CancellationError {
                            #expect(i % 2 == 0, "task \(i) (not cancelled) threw CancellationError")
                        }
                    }
                    try await target.join()
                    #expect(target.withShared { $0.joiners.count } == 0)
                }
            }
        }
    }

}
