import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit

private struct Boom: Error, Equatable { var code: Int }

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
                let c = Coroutine.launch(name: "unobserved-cancel-cancelled") { try Coroutine.delay(hangBound) }
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

    @Test("an error is reported when every joiner — 100 coroutines, more than a withdrawal removes at once, and 5 tasks — was cancelled and had withdrawn before it threw")
    func allJoinersWithdrawnStillReported() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-withdrawn") {
            try await Kit.withScheduler("unobserved-withdrawn") { s in
                let gate = Promise<Void>()
                let target = Coroutine.launch(on: s, name: "unobserved-withdrawn") {
                    try gate.await()
                    throw Boom(code: 6)
                }
                // Given 100 coroutine joiners (tombstones in the middle of the queue once they
                // withdraw) and 5 task joiners
                let joiners = (0..<100).map { _ in Coroutine.launch(on: s) { try target.join() } }
                let tasks = (0..<5).map { _ in Task { try await target.join() } }
                #expect(await Kit.eventually { target.withShared { $0.joiners.count } == 105 })
                // When all of them are cancelled, in an order that leaves tombstones behind the
                // first (every odd one first, then the even ones from the back), and have ended
                for (i, j) in joiners.enumerated() where i % 2 == 1 { j.cancel() }
                for (i, j) in joiners.enumerated().reversed() where i % 2 == 0 { j.cancel() }
                for t in tasks { t.cancel() }
                for j in joiners { try await j.join() }
                for t in tasks { await #expect(throws: CancellationError.self) { try await t.value } }
                // And then the target throws
                gate.fulfill(())
                // (waited for without joining it, which would observe the error)
                #expect(await Kit.eventually { target.withShared { $0.finished } })
                _ = try await Kit.onSchedulerLoop(s) {}   // the report's job has run
            }
        }
        // Then its error is reported, once
        try #require(calls.count == 1)
        #expect(calls[0].1 as? Boom == Boom(code: 6))
    }

    @Test("an error is not reported when one coroutine joiner is still waiting among 100 cancelled ones, and that joiner is woken")
    func oneLiveJoinerAmongTombstones() async throws {
        let calls = try await recordingUnobserved(prefix: "unobserved-one-live") {
            try await Kit.withScheduler("unobserved-one-live") { s in
                let gate = Promise<Void>()
                let target = Coroutine.launch(on: s, name: "unobserved-one-live") {
                    try gate.await()
                    throw Boom(code: 7)
                }
                let woken = Kit.Counter()
                // Given 101 coroutine joiners, of which only the 51st will stay
                let joiners = (0...100).map { _ in Coroutine.launch(on: s) { try target.join(); _ = woken.increment() } }
                #expect(await Kit.eventually { target.withShared { $0.joiners.count } == 101 })
                // When all the others are cancelled and have withdrawn
                for (i, j) in joiners.enumerated() where i != 50 { j.cancel() }
                for (i, j) in joiners.enumerated() where i != 50 { try await j.join() }
                // And the target throws
                gate.fulfill(())
                try await joiners[50].join()
                _ = try await Kit.onSchedulerLoop(s) {}
                // Then the remaining joiner was woken (normally), and only it
                #expect(joiners[50].error == nil)
                #expect(woken.value == 1)
            }
        }
        // And nothing was reported
        #expect(calls.isEmpty)
    }
}

extension UnobservedErrorTests {
    @Suite("Unstarted coroutines")
    struct UnstartedNotReported {
        /// A regression test: it failed before its fix.
        @Test("a launch onto a stopped scheduler finishes with schedulerStopped and is not reported as unobserved")
        func stoppedLaunchIsNotReported() async throws {
            let reports = Kit.Log<String>()
            Coroutine.unobservedErrorHandler = { c, e in
                if c.name == "late" { reports.append("\(e)") }
            }
            defer { Coroutine.unobservedErrorHandler = Coroutine.defaultUnobservedErrorHandler }
            let s = CoroutineScheduler(name: "stopped-for-good")
            s.stop()
            #expect(await Kit.eventually { s.isStopped })
            let c = Coroutine.launch(on: s, name: "late") {}
            try await c.join()
            #expect(c.error as? CoroutineError == .schedulerStopped)
            // A report would be queued at once as a job on a pool scheduler (the stopped one
            // forwards its jobs there); a loop runs queued jobs before coroutines queued after
            // them, so one coroutine per pool scheduler flushes any such report.
            for pooled in SchedulerPool.default(for: .default).schedulers {
                _ = try await Coroutine.async(on: pooled) { 0 }.value
            }
            #expect(reports.all.isEmpty)
        }
    }
}

extension UnobservedErrorTests {
    @Suite("Handler storage")
    struct HandlerStorage {
        /// The address of a local in a frame of its own: how deep the stack is at the call.
        @inline(never)
        static func stackAddress() -> UInt {
            var local = 0
            return withUnsafeMutablePointer(to: &local) { UInt(bitPattern: $0) }
        }

        /// How many bytes of stack one call of the installed handler takes below the caller.
        fileprivate static func callDepth(_ c: Coroutine, _ reached: Kit.Box<UInt>) -> UInt {
            let top = stackAddress()
            Coroutine.unobservedErrorHandler(c, CancellationError())
            return top &- reached.value
        }

        /// A regression test: each read of the handler once wrapped it in two more thunks.
        @Test("reading unobservedErrorHandler does not wrap it: after 1,000 reads, a call is no deeper")
        func readsDoNotWrap() async throws {
            // Given a handler that records how deep in the stack it runs
            let reached = Kit.Box<UInt>(0)
            Coroutine.unobservedErrorHandler = { _, _ in reached.value = HandlerStorage.stackAddress() }
            defer { Coroutine.unobservedErrorHandler = Coroutine.defaultUnobservedErrorHandler }
            let c = Coroutine.launch(name: "depth-probe") {}
            try await c.join()
            let before = Self.callDepth(c, reached)
            // When the handler is read 1,000 times (each unobserved error reads it once)
            for _ in 0..<1_000 { _ = Coroutine.unobservedErrorHandler }
            // Then calling it takes exactly as much stack as before (a reabstraction thunk per
            // read would add 2,000 frames)
            #expect(Self.callDepth(c, reached) == before)
        }
    }
}
