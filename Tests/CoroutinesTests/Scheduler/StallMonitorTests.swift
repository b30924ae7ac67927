import CCoroutines
import CoroutinesTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Coroutines

#if canImport(Glibc)
import Glibc
#endif

private typealias Kit = CoroutineTestKit

/// Stall reports (see <doc:Stalls>): a scheduler whose coroutine, or loop job, runs without
/// suspending for longer than the threshold is reported once, while the stall lasts.
///
/// The stalls here are real: a coroutine blocks its scheduler's thread, usually until the report
/// about it has arrived, so that every assertion is about order (the report came during the
/// stall) and never about how fast the machine is. The report hook is global, so the suite is
/// serialized; each test captures only the lines that name its own schedulers and passes the
/// others on (other suites' blocked threads are reported on standard error as usual).
@Suite("Stall monitor", .serialized, .enabled(if: StallMonitor.shared.isEnabled))
struct StallMonitorTests {
    // MARK: Reports of real stalls

    @Test("a coroutine blocked in sleep is reported while it sleeps, in one line naming it and its scheduler")
    func sleepingCoroutineIsReportedWhileItSleeps() async throws {
        let s = CoroutineScheduler(name: "stall-sleep")
        defer { s.stop() }
        let woke = Kit.Box(false)
        let reports = Kit.Log<(line: String, sleeperHadWoken: Bool)>()
        let capture = StallCapture({ $0.contains("scheduler 'stall-sleep'") && $0.contains("coroutine 'sleeper'") }) { line in
            reports.append((line, woke.value))
        }
        defer { capture.restore() }
        let reportsWhenItWoke = Kit.Box(-1)
        // Given a coroutine that blocks its scheduler's thread in sleep(1), again until the report
        // has come (a single second was not always enough under ThreadSanitizer in the full
        // suite; 60 sleeps only detect a monitor that never reports)
        let sleeper = Coroutine.launch(on: s, name: "sleeper") {
            var sleeps = 0
            repeat {
                blockThread(forAtLeast: StallMonitor.shared.threshold)
                sleeps += 1
            } while reports.all.isEmpty && sleeps < 60
            woke.value = true
            reportsWhenItWoke.value = reports.all.count
        }
        try await sleeper.join()
        // Then the report had been delivered when the sleeping ended, and the sleeper had not
        // woken when it was: it came during the stall. One line, however long the stall lasted.
        #expect(reportsWhenItWoke.value == 1)
        let all = reports.all
        try #require(all.count == 1, "\(all.map(\.line))")
        #expect(!all[0].sleeperHadWoken)
        let line = all[0].line
        #expect(line.hasPrefix("swift-coroutines: scheduler 'stall-sleep' stalled: coroutine 'sleeper' has run for at least "), "\(line)")
        #expect(line.contains("Coroutine.offload"))
        #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { $0 != "\n" }, "one line: \(line)")
    }

    @Test("two stalls give two lines, each during its stall; a stall that lasts on is not reported again; a parked scheduler never")
    func twoStallsGiveTwoLines() async throws {
        let s = CoroutineScheduler(name: "stall-twice")
        let parked = CoroutineScheduler(name: "stall-parked")
        defer { s.stop(); parked.stop() }
        let stall = Kit.Box(0)
        let reported = DispatchSemaphore(value: 0)
        let reports = Kit.Log<(line: String, duringStall: Int)>()
        let capture = StallCapture({ $0.contains("coroutine 'twice'") || $0.contains("scheduler 'stall-parked'") }) { line in
            reports.append((line, stall.value))
            if line.contains("coroutine 'twice'") { reported.signal() }
        }
        defer { capture.restore() }
        // Given a scheduler that stays parked all along: its coroutine waits in a delay
        let waiter = Coroutine.launch(on: parked, name: "waiter") { try Coroutine.delay(.seconds(600)) }
        try await Coroutine.async(on: parked) {}.value   // the waiter is suspended now
        let timedOut = Kit.Box(false)
        // When a coroutine stalls its scheduler twice, with a switch (a yield) in between
        let twice = Coroutine.launch(on: s, name: "twice") {
            for i in 1...2 {
                stall.value = i
                // The stall: the thread blocks until the report about it has arrived…
                if reported.wait(timeout: .now() + hangBoundInterval) == .timedOut { timedOut.value = true }
                // …and then lasts on for three more of the monitor's samples.
                let later = StallMonitor.shared.sampleCount.load(ordering: .acquiring) + 3
                while StallMonitor.shared.sampleCount.load(ordering: .acquiring) < later { usleep(1_000) }
                try Coroutine.yield()   // the switch that ends this stall
            }
            stall.value = 3
        }
        try await twice.join()
        waiter.cancel()
        // Then there was one line per stall, each delivered during its own stall (what the
        // coroutine does after its second stall is not this test's business)
        #expect(!timedOut.value, "a stall was not reported within 30 s")
        let during = reports.all.filter { (1...2).contains($0.duringStall) }
        #expect(during.map(\.duringStall) == [1, 2], "\(during.map(\.line))")
        #expect(during.allSatisfy { $0.line.contains("scheduler 'stall-twice' stalled: coroutine 'twice'") })
        // And the parked scheduler was never reported meanwhile
        #expect(!during.contains { $0.line.contains("'stall-parked'") })
    }

    @Test("the report names an unnamed coroutine by its description, and a job on the loop as such")
    func reportSubjects() async throws {
        let s = CoroutineScheduler(name: "stall-subjects")
        defer { s.stop() }
        // Phase 1: an unnamed coroutine stalls; phase 2: a job on the loop does.
        let phase = Kit.Box(0)
        let unnamedDescription = Kit.Box("")
        let reported = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        let reports = Kit.Log<(line: String, phase: Int)>()
        let capture = StallCapture({ line in
            switch phase.value {
            case 1: line.contains(unnamedDescription.value)
            case 2: line.contains("scheduler 'stall-subjects' stalled: a job on its loop")
            default: false
            }
        }) { line in
            let p = phase.value
            reports.append((line, p))
            reported[p - 1].signal()
        }
        defer { capture.restore() }
        let timedOut = Kit.Counter()
        // Given an unnamed coroutine that blocks its scheduler until reported
        let unnamed = Coroutine.launch(on: s) {
            unnamedDescription.value = Coroutine.current!.description
            phase.value = 1
            if reported[0].wait(timeout: .now() + hangBoundInterval) == .timedOut { timedOut.increment() }
        }
        try await unnamed.join()
        // And then a job on the loop that does the same
        let jobDone = Promise<Void>()
        s.execute {
            phase.value = 2
            if reported[1].wait(timeout: .now() + hangBoundInterval) == .timedOut { timedOut.increment() }
            phase.value = 3
            jobDone.fulfill(())
        }
        try await jobDone.value
        // Then each was reported once, by what it is
        #expect(timedOut.value == 0)
        let all = reports.all
        try #require(all.map(\.phase) == [1, 2], "\(all.map(\.line))")
        #expect(all[0].line.contains("scheduler 'stall-subjects' stalled: Coroutine(0x"), "\(all[0].line)")
        #expect(all[0].line.contains(unnamed.description), "\(all[0].line)")
        #expect(all[1].line.contains("a job on its loop (a promise observer, a handler) has run for at least "), "\(all[1].line)")
    }

    @Test("dumpAll() says how long a running coroutine has been running")
    func dumpAllShowsRunningTime() async throws {
        let s = CoroutineScheduler(name: "stall-dump")
        defer { s.stop() }
        let report = Promise<String>()
        let capture = StallCapture({ $0.contains("scheduler 'stall-dump' stalled: coroutine 'busy'") }) { line in
            report.fulfill(line)
        }
        defer { capture.restore() }
        let release = DispatchSemaphore(value: 0)
        // Given a coroutine that blocks its scheduler until released
        let busy = Coroutine.launch(on: s, name: "busy") { _ = release.wait(timeout: .now() + hangBoundInterval) }
        defer { release.signal() }
        // When the monitor has reported it (so it has run for at least the threshold)
        _ = try await report.timeout(hangBound).value
        let dump = Coroutine.dumpAll()
        // Then its dumpAll() line says for how long, at least the threshold
        let line = try #require(dump.split(separator: "\n").first { $0.hasPrefix("'busy' on stall-dump: ") }, "\(dump)")
        let match = try #require(line.firstMatch(of: /running for (\d+) ms/), "\(line)")
        #expect(UInt64(match.1)! >= StallMonitor.shared.threshold / 1_000_000, "\(line)")
        release.signal()
        try await busy.join()
        // And once it is no longer running, it says nothing of the kind (it may still be listed,
        // finished, until its loop has reaped it)
        #expect(!Coroutine.dumpAll().contains("'busy' on stall-dump: running"))
    }

    // MARK: The watch of one scheduler (no threads, no clock)

    @Test("a scheduler parked or not driven is never stalled, however long its count stands")
    func idleSchedulerIsNeverStalled() {
        var watch = StallWatch()
        let ms: UInt64 = 1_000_000
        for t in stride(from: UInt64(0), through: 10_000 * ms, by: 20_000_000) {
            #expect(watch.observe(count: 7, busy: false, now: t, threshold: 100 * ms) == nil)
        }
        // Busy again with the same count: watched from now, not from before the idle spell
        #expect(watch.observe(count: 7, busy: true, now: 10_020 * ms, threshold: 100 * ms) == nil)
        #expect(watch.observe(count: 7, busy: true, now: 10_100 * ms, threshold: 100 * ms) == nil)
        #expect(watch.observe(count: 7, busy: true, now: 10_120 * ms, threshold: 100 * ms)
                == StallWatch.Stall(count: 7, since: 10_020 * ms))
    }

    @Test("one report per stall: at the first sample a threshold after the count stopped, never again until it moves")
    func watchReportsOncePerStall() {
        var watch = StallWatch()
        let ms: UInt64 = 1_000_000
        var reports: [StallWatch.Stall] = []
        func sample(_ count: UInt, at t: UInt64) {
            if let s = watch.observe(count: count, busy: true, now: t * ms, threshold: 100 * ms) { reports.append(s) }
        }
        // A count that moves at every sample is never a stall
        for t in stride(from: UInt64(0), to: 1_000, by: 20) { sample(UInt(t), at: t) }
        #expect(reports.isEmpty)
        // A count that stands from 1,000 ms: reported at the first sample 100 ms on, then never again
        for t in stride(from: UInt64(1_000), through: 3_000, by: 20) { sample(1_000, at: t) }
        #expect(reports == [StallWatch.Stall(count: 1_000, since: 1_000 * ms)])
        #expect(watch.runningTime(count: 1_000, now: 3_000 * ms) == 2_000 * ms)
        #expect(watch.runningTime(count: 1_001, now: 3_000 * ms) == nil)
        // It moves once, then stands again: a second stall, a second report
        for t in stride(from: UInt64(3_020), through: 3_200, by: 20) { sample(1_001, at: t) }
        #expect(reports == [StallWatch.Stall(count: 1_000, since: 1_000 * ms), StallWatch.Stall(count: 1_001, since: 3_020 * ms)])
    }

    @Test("time in which the monitor itself did not sample (a debugger, a starved machine) does not count towards a stall")
    func gapInTheSamplesRestartsTheTiming() {
        var watch = StallWatch()
        let ms: UInt64 = 1_000_000
        #expect(watch.observe(count: 3, busy: true, now: 0, threshold: 100 * ms) == nil)
        #expect(watch.observe(count: 3, busy: true, now: 20 * ms, threshold: 100 * ms) == nil)
        // The monitor's next sample comes 5 s later: the count stood, but nobody saw it stand
        #expect(watch.observe(count: 3, busy: true, now: 5_020 * ms, threshold: 100 * ms, afterGap: true) == nil)
        #expect(watch.observe(count: 3, busy: true, now: 5_100 * ms, threshold: 100 * ms) == nil)
        // Timed from the end of the gap
        #expect(watch.observe(count: 3, busy: true, now: 5_120 * ms, threshold: 100 * ms)
                == StallWatch.Stall(count: 3, since: 5_020 * ms))
        // A gap after the report does not report the same stall again
        #expect(watch.observe(count: 3, busy: true, now: 9_000 * ms, threshold: 100 * ms, afterGap: true) == nil)
        #expect(watch.observe(count: 3, busy: true, now: 9_200 * ms, threshold: 100 * ms) == nil)
        // The gap that counts as one: twice the interval, or half the threshold if longer
        #expect(StallMonitor(thresholdMilliseconds: 100).maximumGap == 50 * ms)
        #expect(StallMonitor(thresholdMilliseconds: 20).maximumGap == 10 * ms)
        #expect(StallMonitor(thresholdMilliseconds: 1_000).maximumGap == 500 * ms)
    }

    @Test("a scheduler thread starved of CPU is not reported; one that blocks or computes is, even on a busy CPU")
    func starvedThreadIsNotReported() {
        let ms: UInt64 = 1_000_000
        /// The reports of a count that stands from 0 ms on, sampled every 20 ms up to `end`, with
        /// the thread's times at each instant given by `times`.
        func reports(until end: UInt64, _ times: @escaping (UInt64) -> ThreadTimes?) -> [StallWatch.Stall] {
            var watch = StallWatch()
            var found: [StallWatch.Stall] = []
            for t in stride(from: UInt64(0), through: end, by: 20) {
                if let stall = watch.observe(count: 9, busy: true, now: t * ms, threshold: 100 * ms,
                                             times: { times(t) }) { found.append(stall) }
            }
            return found
        }
        func times(ran: Double, waited: Double) -> (UInt64) -> ThreadTimes? {
            { t in ThreadTimes(ran: UInt64(Double(t * ms) * ran), waited: UInt64(Double(t * ms) * waited), at: t * ms) }
        }
        let fromStart = [StallWatch.Stall(count: 9, since: 0)]
        // Blocked in a system call: neither running nor waiting for a CPU
        #expect(reports(until: 500, times(ran: 0, waited: 0)) == fromStart)
        // Computing, alone on its CPU or sharing it with others
        #expect(reports(until: 500, times(ran: 1, waited: 0)) == fromStart)
        #expect(reports(until: 500, times(ran: 0.4, waited: 0.6)) == fromStart)
        // No CPU accounting (not Linux): reported
        #expect(reports(until: 500) { _ in nil } == fromStart)
        // Runnable but given no CPU until 300 ms, then blocked: timed from 300 ms only
        let starvedThenBlocked = { (t: UInt64) -> ThreadTimes? in
            let s = min(t, 300)
            return ThreadTimes(ran: s * ms / 100, waited: s * ms * 9 / 10, at: t * ms)
        }
        #expect(reports(until: 500, starvedThenBlocked) == [StallWatch.Stall(count: 9, since: 300 * ms)])
        // The accounting of a real thread can be read (Linux)
        #if os(Linux)
        #expect(ThreadTimes.read(thread: ccoro_thread_id(), at: 1) != nil)
        #endif
        #expect(ThreadTimes.read(thread: 0, at: 1) == nil)
    }

    // MARK: Configuration

    @Test("COROUTINES_STALL_MS takes a whole number of milliseconds, 0 for off; another value is ignored with one line")
    func thresholdSetting() {
        var warnings: [String] = []
        let parse = { (value: String?) in StallMonitor.thresholdMilliseconds(setting: value) { warnings.append($0) } }
        #expect(parse(nil) == 100)
        #expect(parse("0") == 0)
        #expect(parse("250") == 250)
        #expect(parse(" 40 ") == 40)
        #expect(parse("86400000") == 86_400_000)
        #expect(warnings.isEmpty)
        for bad in ["", "-1", "soon", "1.5", "100ms", "86400001", "1 2"] {
            warnings = []
            #expect(parse(bad) == 100, "\(bad)")
            #expect(warnings.count == 1 && warnings[0].contains("COROUTINES_STALL_MS=\(bad)")
                    && warnings[0].hasSuffix("\n") && warnings[0].dropLast().allSatisfy { $0 != "\n" }, "\(warnings)")
        }
        // Sampling: a quarter of the threshold, between 1 and 20 ms
        let ms: UInt64 = 1_000_000
        #expect(StallMonitor.samplingInterval(threshold: 100 * ms) == 20 * ms)
        #expect(StallMonitor.samplingInterval(threshold: 40 * ms) == 10 * ms)
        #expect(StallMonitor.samplingInterval(threshold: 2 * ms) == 1 * ms)
        #expect(StallMonitor.samplingInterval(threshold: 60_000 * ms) == 20 * ms)
    }
}

/// The parts that need a process of their own: the real standard error, the environment read
/// once per process, and an idle process.
@Suite("Stall monitor, in a child process", .enabled(if: TestEnvironment.exitTestsEnabled))
struct StallMonitorExitTests {
    @Test("a coroutine spinning without end is reported on standard error, once, while it spins")
    func spinningCoroutineIsReportedOnStandardError() async throws {
        let outcome = await ChildProcess.run(.success, id: "spinning", environment: [StallMonitor.variable: "100"]) {
            let s = CoroutineScheduler(name: "stall-spin")
            let stop = Kit.Counter()
            // Given a coroutine that spins and never suspends
            let spinner = Coroutine.launch(on: s, name: "spinner") {
                while stop.value == 0 {}
            }
            // When the monitor has reported it (to standard error, the default) and taken three
            // more samples while it went on spinning
            #expect(await Kit.eventually { StallMonitor.shared.reportCount.load(ordering: .acquiring) == 1 })
            let later = StallMonitor.shared.sampleCount.load(ordering: .acquiring) + 3
            #expect(await Kit.eventually { StallMonitor.shared.sampleCount.load(ordering: .acquiring) >= later })
            #expect(!spinner.isFinished)
            // (stopped only so that the child ends cleanly)
            stop.increment()
            try await spinner.join()
            s.stop()
            #expect(StallMonitor.shared.reportCount.load(ordering: .acquiring) == 1)
        }
        guard let result = outcome else { return }   // nil in the child process
        // Then its standard error has one report line, naming the coroutine and its scheduler
        let stderr = result.standardError
        let lines = stderr.split(separator: "\n").filter { $0.contains("stalled") }
        try #require(lines.count == 1, "stderr: \(stderr)")
        let line = lines[0]
        #expect(line.hasPrefix("swift-coroutines: scheduler 'stall-spin' stalled: coroutine 'spinner' has run for at least "), "\(line)")
        #expect(line.contains("Coroutine.offload"), "\(line)")
        let ms = try #require(line.firstMatch(of: /has run for at least (\d+) ms/), "\(line)")
        #expect(UInt64(ms.1)! >= 100, "reported before the threshold: \(line)")
    }

    @Test("COROUTINES_STALL_MS=0 turns the monitor off: no thread and no report, even for a stall")
    func zeroTurnsTheMonitorOff() async throws {
        let outcome = await ChildProcess.run(.success, id: "off", environment: [StallMonitor.variable: "0"]) {
            #expect(!StallMonitor.shared.isEnabled)
            let s = CoroutineScheduler(name: "stall-off")
            // A stall three times as long as the default threshold
            let blocker = Coroutine.launch(on: s, name: "blocker") { usleep(300_000) }
            try await blocker.join()
            s.stop()
            #expect(!StallMonitor.shared.isStarted)
            #expect(StallMonitor.shared.reportCount.load(ordering: .acquiring) == 0)
            #expect(!threadNames().contains("stall-monitor"))
        }
        guard let result = outcome else { return }   // nil in the child process
        let stderr = result.standardError
        #expect(!stderr.contains("stalled"), "stderr: \(stderr)")
        #expect(!stderr.contains("is not a whole number"), "stderr: \(stderr)")
    }

    @Test("an invalid COROUTINES_STALL_MS gives one line on standard error and the default threshold")
    func invalidSettingWarnsOnce() async throws {
        let outcome = await ChildProcess.run(.success, id: "invalid", environment: [StallMonitor.variable: "soon"]) {
            let s = CoroutineScheduler(name: "stall-invalid")
            try await Coroutine.async(on: s) {}.value
            s.stop()
            #expect(StallMonitor.shared.threshold == 100_000_000)
            #expect(StallMonitor.shared.isStarted)
        }
        guard let result = outcome else { return }   // nil in the child process
        let stderr = result.standardError
        let lines = stderr.split(separator: "\n").filter { $0.hasPrefix("swift-coroutines: \(StallMonitor.variable)") }
        #expect(lines.count == 1 && lines[0].contains("\(StallMonitor.variable)=soon"), "stderr: \(stderr)")
    }

    @Test("the monitor sleeps while every scheduler is parked (no samples, under 1 % of a CPU), and wakes for the next stall")
    func idleProcessMonitorSleeps() async throws {
        await ChildProcess.run(.success, id: "idle", environment: [StallMonitor.variable: "100"]) {
            let monitor = StallMonitor.shared
            let s = CoroutineScheduler(name: "stall-idle")
            // Given a process whose only scheduler ran a coroutine and then parked
            try await Coroutine.async(on: s) {}.value
            #expect(monitor.isStarted)
            // Then the monitor falls asleep
            #expect(await Kit.eventually { monitor.isAsleep })
            let samples = monitor.sampleCount.load(ordering: .acquiring)
            let monitorCPU = threadCPUNanoseconds(monitor.threadID.load(ordering: .relaxed))
            let processCPU = processCPUNanoseconds()
            // And for the 2 s of an idle spell takes no sample on its own and uses (almost) no CPU.
            // (The loop may leave the poller once more, at once, for a wake-up posted while it
            // was about to park: that wakes the monitor for one look, two samples.)
            try await Task.sleep(for: .seconds(2))
            #expect(monitor.isAsleep)
            let taken = monitor.sampleCount.load(ordering: .acquiring) - samples
            #expect(taken <= 2, "\(taken) samples in 2 s of an idle process")
            if let before = monitorCPU, let after = threadCPUNanoseconds(monitor.threadID.load(ordering: .relaxed)) {
                #expect(after - before < 20_000_000, "the monitor thread used \(after - before) ns of CPU in 2 s")
            }
            let processUsed = processCPUNanoseconds() - processCPU
            #expect(processUsed < 20_000_000, "the idle process used \(processUsed) ns of CPU in 2 s")
            // When a coroutine then stalls its scheduler, the monitor wakes and reports it
            let reported = DispatchSemaphore(value: 0)
            StallMonitor.report = { line in
                StallMonitor.writeToStandardError(line)
                reported.signal()
            }
            let blocked = Coroutine.launch(on: s, name: "after-idle") {
                _ = reported.wait(timeout: .now() + hangBoundInterval)
            }
            try await blocked.join()
            #expect(monitor.reportCount.load(ordering: .acquiring) == 1)
            s.stop()
        }
    }
}

// MARK: - Helpers

/// Captures, for one test, the stall reports whose line `matches` accepts (and tells `onLine`
/// about each, on the monitor thread); every other report goes on to the hook installed before.
private final class StallCapture: Sendable {
    private let previous: @Sendable (String) -> Void
    let lines = Kit.Log<String>()

    init(_ matches: @escaping @Sendable (String) -> Bool, onLine: @escaping @Sendable (String) -> Void = { _ in }) {
        let previous = StallMonitor.report
        self.previous = previous
        let lines = self.lines
        StallMonitor.report = { line in
            guard matches(line) else { return previous(line) }
            lines.append(line)
            onLine(line)
        }
    }

    /// Puts the previous hook back.
    func restore() { StallMonitor.report = previous }
}

/// Blocks the calling thread in `sleep`: 1 s, or ten times `threshold` (nanoseconds) if that is
/// longer (a run with a large `COROUTINES_STALL_MS`).
private func blockThread(forAtLeast threshold: UInt64) {
    if threshold <= 100_000_000 {
        sleep(1)
    } else {
        usleep(useconds_t(min(threshold / 100, UInt64(UInt32.max))))
    }
}

/// The names of this process's threads.
private func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The CPU time of this process's thread `tid` so far (its schedstat), or nil where unavailable.
private func threadCPUNanoseconds(_ tid: UInt64) -> UInt64? {
    guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/schedstat", encoding: .utf8),
          let first = text.split(separator: " ").first else { return nil }
    return UInt64(first)
}

/// The CPU time of this whole process so far (user and system).
private func processCPUNanoseconds() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func ns(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1_000 }
    return ns(usage.ru_utime) + ns(usage.ru_stime)
}
