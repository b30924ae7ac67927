import CoroutinesTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The child-process runner that replaced Swift Testing's exit tests (``ChildProcess``).
///
/// Found with issue 14's 36-second cancellation chain: an exit test held a Swift concurrency
/// thread until its child ended, and with two of them running, every other test of the parallel
/// suite stood still (the chain's 0.2 s of work was reported at 22–36 s, past its hang limit).
@Suite("Tests in a child process")
struct ChildProcessTests {
    /// Files through which the children of this test and the test itself signal each other
    /// (named after the test process, which is each child's parent).
    static func gate(_ name: String, parent: Int32) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("coroutines-child-gate-\(parent)-\(name)").path
    }

    /// Given two children that each stay alive until the test releases them (at most 60 s), the
    /// test must go on running Swift concurrency work while both are alive, and only then
    /// release them. With Swift Testing's exit tests, the two children held both threads of the
    /// two-core pool: nothing of the test could run until they timed out, and they ended with
    /// status 3 instead of 0 — this test failed that way before the change.
    @Test("two children alive at once hold no Swift concurrency thread: other tasks run meanwhile",
          .enabled(if: TestEnvironment.exitTestsEnabled))
    func childrenHoldNoThread() async throws {
        @Sendable func holder(_ name: String) {
            let parent = getppid()
            guard FileManager.default.createFile(atPath: Self.gate("started-\(name)", parent: parent), contents: nil) else { exit(4) }
            let release = Self.gate("release", parent: parent)
            for _ in 0..<6_000 where !FileManager.default.fileExists(atPath: release) { usleep(10_000) }
            if !FileManager.default.fileExists(atPath: release) { exit(3) }   // not released in 60 s
        }
        let me = getpid()
        defer { for name in ["started-a", "started-b", "release"] { try? FileManager.default.removeItem(atPath: Self.gate(name, parent: me)) } }
        // Given two children alive at once
        async let a = ChildProcess.run(.success, id: "holder.a") { holder("a") }
        async let b = ChildProcess.run(.success, id: "holder.b") { holder("b") }
        if ChildProcess.currentID != nil { _ = await (a, b); return }   // in a child: its holder ran
        var bothStarted = false
        for _ in 0..<6_000 where !bothStarted {
            try await Task.sleep(for: .milliseconds(10))
            bothStarted = ["a", "b"].allSatisfy { FileManager.default.fileExists(atPath: Self.gate("started-\($0)", parent: me)) }
        }
        // When eight more tasks run to completion while both children are still waiting
        let finished = await withTaskGroup(of: Int.self) { group in
            for i in 0..<8 { group.addTask { await Task.yield(); return i } }
            return await group.reduce(0) { count, _ in count + 1 }
        }
        let bothStillWaiting = !FileManager.default.fileExists(atPath: Self.gate("release", parent: me))
        let released = FileManager.default.createFile(atPath: Self.gate("release", parent: me), contents: nil)
        // Then the children, released by the test and not by their time limit, succeed
        let (ra, rb) = await (a, b)
        #expect(bothStarted && released)
        #expect(finished == 8 && bothStillWaiting)
        #expect(ra?.succeeded == true && rb?.succeeded == true, "a: \(String(describing: ra)), b: \(String(describing: rb))")
    }
}
