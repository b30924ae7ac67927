import CoroutinesTestSupport
import Foundation
import Testing
@_spi(Diagnostics) @testable import Coroutines

/// Temporary schedulers (those of `Coroutine.run`) release their poller descriptors and threads.
///
/// The counts are of the whole process, so the test runs in a child process of its own
/// (``ChildProcess``): in the parallel suite, other tests' sockets, pipes and child processes
/// came and went meanwhile, and once made the count grow by 76 in a release-build run.
@Suite("Scheduler resources", .enabled(if: TestEnvironment.exitTestsEnabled))
struct SchedulerResourceTests {
    private func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// Threads of this process named like `Coroutine.run`'s temporary scheduler threads (other
    /// suites run in parallel and start threads of their own: offload pools, plain threads).
    private func runThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            return comm.hasPrefix("Coroutine.run")
        }.count
    }

    /// Guards the counts the soak's leak check compares (`Scripts/soak.sh`).
    @Test("RuntimeResources counts a suspended coroutine's stack and timer, and nothing once it is cancelled and settled")
    func runtimeResourcesCountAndReturn() async throws {
        await ChildProcess.run(.success, id: "runtimeResourcesCountAndReturn") {
            try await CoroutineTestKit.onPlainThread { try checkRuntimeResourcesCountAndReturn() }
        }
    }

    private func checkRuntimeResourcesCountAndReturn() throws {
        let s = CoroutineScheduler(name: "resources")
        defer { s.stop() }
        // Given the settled counts
        let before = RuntimeResources.blockingSettled([s])
        // When a coroutine is suspended in a one-hour delay
        let started = Promise<Void>()
        let sleeper = Coroutine.launch(on: s) {
            started.fulfill(())
            try Coroutine.delay(.seconds(3600))
        }
        try Coroutine.runBlocking { try started.await() }
        let during = RuntimeResources.blockingSettled([s])
        // Then it holds one stack, one timer, one live coroutine
        if during.stacksInUse != before.stacksInUse + 1 || during.armedTimers != before.armedTimers + 1
            || during.liveCoroutines != before.liveCoroutines + 1 { exit(10) }
        // When it is cancelled and joined, then, settled, the counts are back
        sleeper.cancel()
        try Coroutine.runBlocking { try sleeper.join() }
        if RuntimeResources.blockingSettled([s]) != before { exit(11) }
    }

    @Test("200 Coroutine.run calls leave no poller descriptors or threads behind")
    func temporarySchedulersReleaseTheirDescriptors() async throws {
        await ChildProcess.run(.success, id: "temporarySchedulersReleaseTheirDescriptors") {
            try await checkTemporarySchedulersReleaseTheirDescriptors()
        }
    }

    private func checkTemporarySchedulersReleaseTheirDescriptors() async throws {
        // Given the number of open descriptors now (other tests may open a few meanwhile)
        for _ in 0..<5 { _ = try await Coroutine.run { 0 } }
        let before = openDescriptors()
        let threadsBefore = runThreads()
        // When 200 temporary schedulers come and go
        for i in 0..<200 {
            let v = try await Coroutine.run { i }
            #expect(v == i)
        }
        // Then their epoll and eventfd descriptors were closed (2 per scheduler would be 400)
        let after = openDescriptors()
        #expect(after - before < 40, "open descriptors grew from \(before) to \(after)")
        // And their threads ended. A thread may still be exiting, and other suites' Coroutine.run
        // calls come and go meanwhile: allow a few, and give exiting threads up to 10 s (200
        // leaked threads would stay).
        var threadsAfter = runThreads()
        let deadline = ContinuousClock.now + .seconds(10)
        while threadsAfter - threadsBefore >= 20 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))   // polling a count the kernel keeps; no signal exists
            threadsAfter = runThreads()
        }
        #expect(threadsAfter - threadsBefore < 20, "Coroutine.run threads grew from \(threadsBefore) to \(threadsAfter)")
    }
}
