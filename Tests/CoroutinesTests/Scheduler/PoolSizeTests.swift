import Foundation
import Testing
@testable import Coroutines

/// The size of the default pools (see <doc:ThreadsSchedulersAndCoroutines>): affinity, the
/// cgroup v2 CPU quota, and `COROUTINES_SCHEDULERS`. The cgroup tree is a fake one in a temporary
/// directory, handed to `PoolSize` through its injectable paths.
@Suite("Pool size")
struct PoolSizeTests {
    /// A fake cgroup v2 mount with `cpu.max` files at the given levels, and a membership file
    /// naming `leaf`.
    struct FakeCgroup {
        let root: URL
        let membership: String
        init(leaf: String, cpuMax: [String: String], v2: Bool = true) throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("fake-cgroup-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: root.appendingPathComponent(leaf), withIntermediateDirectories: true)
            if v2 { try Data("cpu memory\n".utf8).write(to: root.appendingPathComponent("cgroup.controllers")) }
            for (level, text) in cpuMax {
                try Data(text.utf8).write(to: root.appendingPathComponent(level).appendingPathComponent("cpu.max"))
            }
            membership = root.appendingPathComponent("self-cgroup").path
            try Data("1:cpu:/\n0::/\(leaf)\n".utf8).write(to: URL(fileURLWithPath: membership))
        }
        func count(affinity: Int, environment: [String: String] = [:], warnings: inout [String]) -> Int {
            var lines: [String] = []
            let n = PoolSize.defaultCount(environment: environment, affinity: affinity, cgroupFile: membership,
                                          cgroupMounts: ["/nonexistent-cgroup-mount", root.path], warn: { lines.append($0) })
            warnings += lines
            return n
        }
        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    @Test("the smallest cpu.max quota of the cgroup and its ancestors limits the affinity count, rounded up")
    func cgroupQuotaLimitsThePool() throws {
        var warnings: [String] = []
        // Given a leaf allowed 1.5 CPUs under a parent allowed 3, and 8 CPUs in the affinity mask
        let nested = try FakeCgroup(leaf: "a/b", cpuMax: ["a": "300000 100000\n", "a/b": "150000 100000\n"])
        defer { nested.remove() }
        #expect(nested.count(affinity: 8, warnings: &warnings) == 2)
        // An ancestor's quota counts when it is the smaller one
        let parentLimited = try FakeCgroup(leaf: "a/b", cpuMax: ["a": "100000 100000\n", "a/b": "max 100000\n"])
        defer { parentLimited.remove() }
        #expect(parentLimited.count(affinity: 8, warnings: &warnings) == 1)
        // A quota above the affinity count does not raise it
        let generous = try FakeCgroup(leaf: "a", cpuMax: ["a": "1600000 100000\n"])
        defer { generous.remove() }
        #expect(generous.count(affinity: 4, warnings: &warnings) == 4)
        // A quota below one CPU still gives one scheduler
        let tiny = try FakeCgroup(leaf: "a", cpuMax: ["a": "5000 100000\n"])
        defer { tiny.remove() }
        #expect(tiny.count(affinity: 4, warnings: &warnings) == 1)
        #expect(warnings.isEmpty)
    }

    @Test("no quota, \"max\", malformed cpu.max or no cgroup v2 leave the affinity count")
    func noQuota() throws {
        var warnings: [String] = []
        for cpuMax in [[:], ["a": "max 100000\n"], ["a": "lots\n"], ["a": "0 100000\n"], ["a": "100000\n"]] {
            let fake = try FakeCgroup(leaf: "a", cpuMax: cpuMax)
            defer { fake.remove() }
            #expect(fake.count(affinity: 3, warnings: &warnings) == 3, "cpu.max \(cpuMax)")
        }
        let v1Only = try FakeCgroup(leaf: "a", cpuMax: ["a": "100000 100000\n"], v2: false)
        defer { v1Only.remove() }
        #expect(v1Only.count(affinity: 3, warnings: &warnings) == 3)
        #expect(warnings.isEmpty)
    }

    @Test("COROUTINES_SCHEDULERS in 1…1024 sizes the pool; another value is ignored with one line")
    func environmentOverride() throws {
        let fake = try FakeCgroup(leaf: "a", cpuMax: ["a": "200000 100000\n"])
        defer { fake.remove() }
        var warnings: [String] = []
        for (value, expected) in [("1", 1), ("40", 40), ("1024", 1024), (" 7 ", 7)] {
            #expect(fake.count(affinity: 4, environment: ["COROUTINES_SCHEDULERS": value], warnings: &warnings) == expected)
        }
        #expect(warnings.isEmpty)
        for value in ["0", "-3", "1025", "two", ""] {
            var lines: [String] = []
            #expect(fake.count(affinity: 4, environment: ["COROUTINES_SCHEDULERS": value], warnings: &lines) == 2)
            #expect(lines.count == 1 && lines[0].contains("COROUTINES_SCHEDULERS=\(value)") && lines[0].contains("ignored"),
                    "\(lines)")
        }
    }

    @Test("SchedulerPool accepts 1…1024 schedulers: a pool of 40 runs a coroutine on each")
    func fortySchedulers() async throws {
        #expect(SchedulerPool(name: "too-many", count: 1_025) == nil)
        #expect(SchedulerPool(name: "none", count: 0) == nil)
        let pool = try #require(SchedulerPool(name: "forty", count: 40, qos: .background))
        #expect(pool.schedulers.count == 40)
        var names: Set<String> = []
        for s in pool.schedulers {
            names.insert(try await Coroutine.async(on: s) { Coroutine.current?.scheduler.name ?? "none" }.value)
        }
        #expect(names == Set((0..<40).map { "forty.\($0)" }))
    }
}
