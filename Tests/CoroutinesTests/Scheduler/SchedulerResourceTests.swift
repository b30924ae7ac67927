import CoroutinesTestSupport
import Foundation
import Testing
@testable import Coroutines

/// Temporary schedulers (those of `Coroutine.run`) release their poller descriptors and threads.
///
/// The counts are of the whole process, so the test runs in a child process of its own
/// (``ChildProcess``): in the parallel suite, other tests' sockets, pipes and child processes
/// came and went meanwhile, and once made the count grow by 76 in a release-build run.
@Suite("Scheduler resources", .enabled(if: CoroutineTestKit.exitTestsEnabled))
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
