import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The stall monitor: one thread per process that notices a scheduler whose thread has stopped
// taking turns, and says so on standard error while it lasts (see <doc:Stalls>).
//
// A coroutine that does not suspend — it blocks the thread in `read`, `sleep`, a synchronous
// driver, or it spins — keeps every other coroutine, timer and socket of its scheduler waiting,
// and nothing else would tell. The model is Go's system monitor (runtime/proc.go: `sysmon`, and
// `retake`, which compares each P's `schedtick` with the value it saw on its previous pass and
// acts on a P whose tick has not moved for `forcePreemptNS`). Go then preempts the goroutine; a
// stackful coroutine cannot be preempted safely, so this monitor only reports.
//
// Who touches what
//   * A scheduler's own thread (see CoroutineScheduler+Monitor.swift) stores `switchCount` + 1
//     at every switch into a coroutine (`transfer`), every return to the loop
//     (`resumeFromLoop`), the start and end of every loop job and every exit from the poller,
//     and stores what runs in `runningCoroutine`: the coroutine switched to, a marker during a
//     job, nil while the loop does its own bookkeeping (not reported: starting and reaping
//     coroutines, timers and polling are the runtime's work, not the user's). Relaxed stores
//     only: on the switch path there is no atomic read-modify-write, no fence and no clock
//     (x86-64: one `incq` and one `movq` into the scheduler object).
//   * The monitor thread reads those two and the scheduler's `lifecycle` (busy: driven and not
//     parked; SchedulerLifecycle.swift), and keeps its verdict in the scheduler's `stallWatch`
//     (a ``StallWatch``).
//   * `dumpAll()`, on any thread, reads `stallWatch` to tell how long a coroutine has run.
//
// States of the monitor
//   off       COROUTINES_STALL_MS=0. No thread is ever started. Final.
//   unstarted No scheduler has been driven yet; no thread.
//   sampling  The thread samples every scheduler, then sleeps `interval`, and again.
//   asleep    `sleepWord` is 1: the thread waits on it (a futex) with no timeout.
// Transitions
//   unstarted → sampling  the first `drive` of any scheduler starts the thread
//                         (`schedulerStartedDriving`).
//   sampling → asleep     a sample finds no scheduler busy (driven and not parked). The monitor
//                         stores `sleepWord` = 1, samples once more, and only if that sample too
//                         finds none busy does it wait. (Otherwise it stores 0 and samples on.)
//   asleep → sampling     a scheduler that leaves the poller, or starts being driven, loads
//                         `sleepWord`; seeing 1, it exchanges it for 0 and wakes the futex. The
//                         monitor then sleeps one `interval` before its next sample, so it falls
//                         asleep at most once per interval, and a scheduler that parks and
//                         unparks thousands of times a second pays for a futex wake-up at most
//                         that often; otherwise its unpark costs one load.
//
// Invariants
//   1. A report names a scheduler that was driven and not parked, with the same `switchCount`,
//      at every sample over at least `threshold`, samples no further apart than `maximumGap`:
//      the stall has lasted at least that long, and it is still going on when its subject is
//      read (the count is read again then). Time in which the monitor itself did not run (a
//      debugger stopped the process, the machine starved it) does not count: after a longer
//      gap, a stall is timed from the sample that ends the gap. Nor does time in which the
//      scheduler's own thread was starved of CPU (Linux: its schedstat says it waited for a CPU
//      for at least half the window and ran for less than a tenth of it): the machine, not the
//      code, held it up, and the stall is timed afresh from then. A thread that blocks (a
//      `sleep`, a `read`) does not wait for a CPU, and one that computes runs: both are
//      reported.
//   2. At most one report per scheduler and value of its `switchCount`: one stall, however long,
//      gives one line; two stalls (a switch in between), two lines.
//   3. The monitor waits without a timeout only after it announced the wait (`sleepWord` = 1,
//      sequentially consistent) and then saw every scheduler idle. A scheduler becomes busy by a
//      sequentially consistent read-modify-write of its `lifecycle` (setting D, or clearing P)
//      and then loads `sleepWord`: either the monitor's second look sees it busy, or it sees
//      the announcement and wakes the monitor (Dekker's pattern; Go's `sysmonwait` and
//      `sysmonnote` play these roles).
//   4. `runningCoroutine` is dereferenced only under the scheduler's `registryLock`, and the
//      pointer read there is nil, the job marker or a live coroutine. A coroutine stays in its scheduler's
//      registry, which keeps it alive, until the loop reaps it, and reaping takes that lock; the
//      loop stores `runningCoroutine` = nil, after the coroutine's last switch, before it reaps
//      it. So once the reap has happened, a reader holding the lock can no longer read the old
//      pointer; before it, the coroutine is alive and cannot be unlinked while the lock is held.
//   5. A stall is reported within `threshold` + 2 × `interval` of its start (plus the delay of
//      the monitor thread's own wake-ups): the first sample that sees the stalled count comes
//      within one interval of it, and the report at the first sample at least `threshold` later.
//
// Not watched: the blocks of `DispatchQueue.main` that the main scheduler drains inside its poll
// run while the scheduler is still parked (P), so a blocking block there is not reported.

/// The process's stall monitor (see the comment at the top of this file for its states and
/// invariants, and <doc:Stalls> for what users see).
final class StallMonitor: Sendable {
    /// The monitor, configured from `COROUTINES_STALL_MS` when first used.
    static let shared = StallMonitor(thresholdMilliseconds: thresholdMilliseconds(
        setting: ProcessInfoLite.environment(variable), warn: PoolSize.writeToStandardError))

    /// The environment variable that sets the threshold in milliseconds (0: no monitor).
    static let variable = "COROUTINES_STALL_MS"
    /// The threshold when the variable is absent or invalid.
    static let defaultThresholdMilliseconds: UInt64 = 100
    /// The largest threshold accepted: a day.
    static let maximumThresholdMilliseconds: UInt64 = 86_400_000

    /// How long a scheduler must go without a switch, in nanoseconds, before it is reported;
    /// 0 when the monitor is off.
    let threshold: UInt64
    /// How long the monitor sleeps between samples while a scheduler is busy, in nanoseconds.
    let interval: UInt64
    /// The longest time between two samples across which a stall is still timed (invariant 1):
    /// twice the interval or half the threshold, whichever is longer.
    let maximumGap: UInt64

    /// Whether the monitor thread has been started.
    private let started = Atomic<Bool>(false)
    /// 1 while the monitor waits (or is about to wait) for a scheduler to become busy; the futex
    /// word it waits on.
    private let sleepWord = Atomic<UInt32>(0)
    /// Whether the thread waits on `sleepWord` right now (past its second look; tests).
    private let waiting = Atomic<Bool>(false)
    /// Samples taken so far (tests: progress of the monitor).
    let sampleCount = Atomic<Int>(0)
    /// Reports made so far, each counted right before it is delivered to ``report``.
    let reportCount = Atomic<Int>(0)
    /// The monitor thread's kernel id, 0 until it runs (tests: its CPU time).
    let threadID = Atomic<UInt64>(0)

    init(thresholdMilliseconds: UInt64) {
        threshold = thresholdMilliseconds * 1_000_000
        interval = Self.samplingInterval(threshold: threshold)
        maximumGap = max(2 * interval, threshold / 2)
    }

    /// Whether stalls are watched at all (`COROUTINES_STALL_MS` is not 0).
    var isEnabled: Bool { threshold > 0 }
    /// Whether the monitor thread has been started.
    var isStarted: Bool { started.load(ordering: .acquiring) }
    /// Whether the monitor thread waits for a scheduler to become busy: it takes no samples
    /// until one does.
    var isAsleep: Bool { waiting.load(ordering: .acquiring) }

    // MARK: Configuration

    /// The threshold in milliseconds for the value of `COROUTINES_STALL_MS` (nil: unset). A whole
    /// number in `0...maximumThresholdMilliseconds` is taken (0 turns the monitor off); anything
    /// else gives `warn` one line and the default.
    static func thresholdMilliseconds(setting: String?, warn: (String) -> Void) -> UInt64 {
        guard let setting else { return defaultThresholdMilliseconds }
        let fields = setting.split(separator: " ", omittingEmptySubsequences: true)
        if fields.count == 1, let ms = UInt64(fields[0]), ms <= maximumThresholdMilliseconds { return ms }
        warn("swift-coroutines: \(variable)=\(setting) is not a whole number of milliseconds in "
             + "0…\(maximumThresholdMilliseconds); the stall threshold stays \(defaultThresholdMilliseconds) ms\n")
        return defaultThresholdMilliseconds
    }

    /// The sampling interval for `threshold` (nanoseconds): a quarter of it, between 1 and 20 ms.
    ///
    /// A stall is reported at most two intervals after `threshold` (invariant 5): with 20 ms, a
    /// stall is reported within 40 ms of reaching the default 100 ms. Each sample reads a few
    /// words per scheduler, so 50 samples a second while something runs cost nothing worth
    /// measuring (Go's sysmon polls as often as every 20 µs when busy); a quarter of a smaller
    /// threshold keeps the same proportion, and 1 ms bounds the rate for tiny thresholds.
    static func samplingInterval(threshold: UInt64) -> UInt64 {
        min(20_000_000, max(1_000_000, threshold / 4))
    }

    // MARK: Reports

    /// The report hook in a struct (a closure stored directly in a generic `Mutex` is
    /// re-abstracted on every read; see `Coroutine.unobservedErrorHandler`).
    private struct ReportSlot: Sendable {
        var deliver: @Sendable (String) -> Void
    }

    private static let reportSlot = Mutex(ReportSlot(deliver: StallMonitor.writeToStandardError))

    /// Receives every stall report: one line, ending in a newline. The default writes it to
    /// standard error; tests replace it to capture reports. Called on the monitor thread, with
    /// no lock held; it must not block for long (the monitor waits for it).
    static var report: @Sendable (String) -> Void {
        get { reportSlot.locked { $0 }.deliver }
        set { reportSlot.locked { $0.deliver = newValue } }
    }

    /// Writes `line` to standard error in one `write`.
    static let writeToStandardError: @Sendable (String) -> Void = { line in
        line.withCString { _ = write(2, $0, strlen($0)) }
    }

    /// The line for a stall of `scheduler` by `subject` that has lasted `milliseconds`.
    static func reportLine(subject: StallSubject, scheduler: String, milliseconds: UInt64) -> String {
        let (what, others, remedy) = switch subject {
        case .coroutine(let description):
            ("\(description) has run for at least \(milliseconds) ms without suspending", "every other coroutine",
             "move blocking work into Coroutine.offload (CoroutinesFoundation)")
        case .job:
            ("a job on its loop (a promise observer, a handler) has run for at least \(milliseconds) ms without returning",
             "every coroutine",
             "move blocking work into Coroutine.offload (CoroutinesFoundation), in a coroutine the job launches")
        }
        return "swift-coroutines: scheduler '\(scheduler)' stalled: \(what), and \(others), timer and socket of the "
            + "scheduler waits until it does; \(remedy)\n"
    }

    // MARK: Scheduler side

    /// A scheduler started being driven (called after it set D in its `lifecycle`): starts the
    /// monitor thread the first time, and wakes the monitor if it waits.
    func schedulerStartedDriving() {
        guard isEnabled else { return }
        if !started.load(ordering: .acquiring),
           started.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            spawnThread(name: "stall-monitor") { [self] in run() }
            return
        }
        wakeIfAsleep()
    }

    /// A scheduler left the poller (called after it cleared P in its `lifecycle`): wakes the
    /// monitor if it waits. One load when it does not: sequentially consistent for invariant 3,
    /// which on x86-64 is a plain `mov`, as a relaxed load would be (`ldar` on arm64).
    @inline(__always)
    func schedulerUnparked() {
        if _slowPath(sleepWord.load(ordering: .sequentiallyConsistent) != 0) { wake() }
    }

    /// Ends the monitor's wait, once per wait.
    private func wake() {
        if sleepWord.exchange(0, ordering: .sequentiallyConsistent) != 0 {
            withUnsafePointer(to: sleepWord) { p in
                ccoro_futex_wake_one(UnsafeMutableRawPointer(mutating: p).assumingMemoryBound(to: UInt32.self))
            }
        }
    }

    private func wakeIfAsleep() {
        if sleepWord.load(ordering: .sequentiallyConsistent) != 0 { wake() }
    }

    // MARK: The monitor thread

    /// The monitor thread's loop (see the states at the top of the file). Never returns.
    private func run() {
        threadID.store(ccoro_thread_id(), ordering: .relaxed)
        var lastSample: UInt64 = 0
        while true {
            if sampleAll(after: &lastSample) {
                pause()
                continue
            }
            // Nothing busy: announce the wait, then look again (invariant 3).
            sleepWord.store(1, ordering: .sequentiallyConsistent)
            if sampleAll(after: &lastSample) {
                sleepWord.store(0, ordering: .sequentiallyConsistent)
                pause()
                continue
            }
            waiting.store(true, ordering: .releasing)
            while sleepWord.load(ordering: .sequentiallyConsistent) != 0 {
                withUnsafePointer(to: sleepWord) { p in
                    ccoro_futex_wait(UnsafeMutableRawPointer(mutating: p).assumingMemoryBound(to: UInt32.self), 1)
                }
            }
            waiting.store(false, ordering: .releasing)
            // Woken by a scheduler that became busy: its first sample comes one interval later.
            pause()
        }
    }

    private func pause() {
        usleep(useconds_t(interval / 1_000))
    }

    /// Samples every scheduler once and reports the stalls that reached the threshold. Returns
    /// whether any scheduler was busy (driven and not parked). `lastSample` is the time of the
    /// previous sample (0: none), and becomes this one's.
    private func sampleAll(after lastSample: inout UInt64) -> Bool {
        let now = ccoro_now_ns()
        let afterGap = lastSample != 0 && now &- lastSample > maximumGap
        lastSample = now
        var anyBusy = false
        for scheduler in SchedulerDirectory.shared.all {
            let (busy, stall) = scheduler.takeStallSample(now: now, threshold: threshold, afterGap: afterGap)
            anyBusy = anyBusy || busy
            // A busy pool scheduler with unstarted launches and a parked peer that nobody woke
            // (a launch's wake-up check can miss a peer that was just parking): wake it, so that
            // the launches start there (Go's sysmon hands such work off too, `retake`).
            if busy, let launches = scheduler.launchQueue, !launches.isEmpty {
                scheduler.poolForOtherThreads?.wakeIdleSchedulerIfNeeded()
            }
            guard let stall else { continue }
            // Read under the registry lock, and only while the count still stands (invariant 4).
            guard let subject = scheduler.stallSubject(ifStillAt: stall.count) else { continue }
            let line = Self.reportLine(subject: subject, scheduler: scheduler.name,
                                       milliseconds: (now &- stall.since) / 1_000_000)
            reportCount.wrappingAdd(1, ordering: .releasing)
            let deliver = Self.report
            deliver(line)
        }
        sampleCount.wrappingAdd(1, ordering: .releasing)
        return anyBusy
    }
}

/// A thread's CPU accounting at one moment (Linux: `/proc/self/task/<tid>/schedstat`).
struct ThreadTimes: Equatable {
    /// Nanoseconds the thread has run on a CPU.
    let ran: UInt64
    /// Nanoseconds it has waited, runnable, for a CPU.
    let waited: UInt64
    /// When this was read (`ccoro_now_ns`).
    let at: UInt64

    /// Whether, since `earlier`, the thread waited for a CPU at least half the time and ran less
    /// than a tenth of it: the machine did not let it run, so its code cannot be blamed for not
    /// switching. A thread that blocks (it does not wait for a CPU) or computes (it runs) is not
    /// starved.
    func starved(since earlier: ThreadTimes) -> Bool {
        guard at > earlier.at, ran >= earlier.ran, waited >= earlier.waited else { return false }
        let window = at - earlier.at
        return (waited - earlier.waited) * 2 >= window && (ran - earlier.ran) * 10 < window
    }

    /// The times of this process's thread `thread` (a kernel id), read at `at`; nil where the
    /// system does not tell (not Linux, no schedstat, a thread id of 0).
    static func read(thread: UInt64, at: UInt64) -> ThreadTimes? {
        #if os(Linux)
        guard thread != 0, let text = PoolSize.readSmallFile("/proc/self/task/\(thread)/schedstat") else { return nil }
        let fields = text.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, let ran = UInt64(fields[0]), let waited = UInt64(fields[1]) else { return nil }
        return ThreadTimes(ran: ran, waited: waited, at: at)
        #else
        return nil
        #endif
    }
}

/// What a stalled scheduler is running.
enum StallSubject: Equatable {
    /// A coroutine, by its name (`coroutine 'name'`) or, unnamed, its description.
    case coroutine(String)
    /// A job on the loop (a promise observer, a handler).
    case job
}

/// The stall monitor's view of one scheduler, updated at every sample (monitor thread), read by
/// `dumpAll()`.
///
/// States: *unwatched* (idle — parked or not driven — at the last sample, or never sampled);
/// *watching* `count` since `since` (busy at every sample since then, with that switch count);
/// the same with `reported` set once the stall was reported. Idle → unwatched; busy with another
/// count → watching it from now; the same count after a gap in the samples → watching it from
/// now (unless reported); watching for at least the threshold → reported, once, unless the
/// thread was starved of CPU meanwhile (``ThreadTimes/starved(since:)``) → watching it from now.
struct StallWatch {
    /// The switch count seen at every sample since `since`; meaningful while `watching`.
    private(set) var count: UInt = 0
    /// The monitor's clock (`ccoro_now_ns`) at the first sample that saw `count`.
    private(set) var since: UInt64 = 0
    /// Whether the scheduler was busy at the last sample.
    private(set) var watching = false
    /// Whether the stall at `count` has been reported.
    private(set) var reported = false
    /// The scheduler thread's CPU times at the second sample that saw `count` (the first at
    /// which it stood), to tell a stall from CPU starvation at the end; nil if unavailable.
    private(set) var baseline: ThreadTimes?
    /// Whether `baseline` has been read for the current watch.
    private(set) var measured = false

    /// A stall to report: the count it stands at, and since when the monitor has seen it.
    struct Stall: Equatable {
        let count: UInt
        let since: UInt64
    }

    /// Takes one sample: the scheduler's switch count, whether it is busy (driven and not
    /// parked), the time and the threshold (nanoseconds), whether the monitor's previous sample
    /// is too long ago to time a stall across (``StallMonitor/maximumGap``), and how to read the
    /// scheduler thread's CPU times now (called only while a count stands). Returns the stall to
    /// report now, if this sample is the first to find it at least `threshold` old.
    mutating func observe(count: UInt, busy: Bool, now: UInt64, threshold: UInt64, afterGap: Bool = false,
                          times: () -> ThreadTimes? = { nil }) -> Stall? {
        guard busy else {
            watching = false
            reported = false
            measured = false
            return nil
        }
        guard watching, count == self.count else {
            watching = true
            self.count = count
            since = now
            reported = false
            measured = false
            return nil
        }
        if reported { return nil }
        if afterGap {
            since = now
            measured = false
            return nil
        }
        if !measured {
            measured = true
            baseline = times()
        }
        guard now &- since >= threshold else { return nil }
        if let baseline, let current = times(), current.starved(since: baseline) {
            since = now
            self.baseline = current
            return nil
        }
        reported = true
        return Stall(count: count, since: since)
    }

    /// How long (nanoseconds at `now`) the run that holds switch count `count` has lasted, as far
    /// as the samples tell (at most one interval short); nil if no sample has seen it.
    func runningTime(count: UInt, now: UInt64) -> UInt64? {
        guard watching, count == self.count, now >= since else { return nil }
        return now - since
    }
}
