import CCoroutines

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The I/O readiness poller of one scheduler: epoll on Linux, kqueue on macOS (the platform code
/// is in CCoroutines' poll.c), plus a wake-up descriptor that other threads signal to interrupt a
/// blocking wait (eventfd on Linux, a pipe on macOS).
///
/// Two kinds of interest: one-shot (``arm(fd:readable:writable:)``: after an event the caller
/// re-arms what it still wants), and persistent edge-triggered registrations
/// (``register(fd:datum:)``, for ``PollDescriptor``) whose events report their datum.
/// Threading: `wake()` is callable from any thread; everything else on the owning scheduler's thread.
final class Poller: @unchecked Sendable {
    private let pollFD: Int32
    private let wakeReadFD: Int32
    private let wakeWriteFD: Int32
    /// The events of the last ``wait(timeoutNanoseconds:)``.
    let events = UnsafeMutablePointer<ccoro_poll_event>.allocate(capacity: Int(Poller.capacity))
    private static let capacity: Int32 = 64

    init() {
        // Before the runtime's first descriptor and thread (ForkGuard invariant 1).
        ForkGuard.install()
        var r: Int32 = -1, w: Int32 = -1
        pollFD = ccoro_poll_create(&r, &w)
        precondition(pollFD >= 0, "cannot create the I/O poller (errno \(errno))")
        wakeReadFD = r
        wakeWriteFD = w
    }

    deinit {
        close(pollFD)
        close(wakeReadFD)
        if wakeWriteFD != wakeReadFD { close(wakeWriteFD) }
        events.deallocate()
    }

    /// Interrupts a blocking `wait`. Thread-safe. In a forked child it does nothing: the
    /// descriptor is the parent's, and no loop of the child waits on it (``ForkGuard``).
    func wake() {
        if ForkGuard.isForkedChild { return }
        ccoro_poll_wake(wakeWriteFD)
    }

    /// Arms one-shot interest in `fd`. Returns 0 or errno (EBADF; EPERM for regular files).
    func arm(fd: Int32, readable: Bool, writable: Bool) -> Int32 {
        ccoro_poll_arm(pollFD, fd, readable ? 1 : 0, writable ? 1 : 0)
    }

    /// Removes interest in `fd` (no-op if none).
    func disarm(fd: Int32) { ccoro_poll_disarm(pollFD, fd) }

    /// Watches `fd` for readability persistently (the dispatch main queue's handle).
    func watchPersistently(fd: Int32) { _ = ccoro_poll_watch(pollFD, fd) }

    /// Registers `fd` persistently and edge-triggered in both directions; its events report
    /// `datum` (which has ``PollTable/tag`` set). Returns 0 or errno (EPERM for regular files).
    func register(fd: Int32, datum: UInt64) -> Int32 { ccoro_poll_register(pollFD, fd, datum) }

    /// Waits for readiness or a wake-up and returns how many of ``events`` it filled.
    /// `timeoutNanoseconds` nil waits indefinitely, 0 polls. Wake-up events are consumed here and
    /// not reported. An event's datum is the descriptor number for one-shot interest, the
    /// registered datum otherwise.
    func wait(timeoutNanoseconds: UInt64?) -> Int {
        let t = timeoutNanoseconds.map { Int64(clamping: $0) } ?? -1
        let n = Int(ccoro_poll_wait(pollFD, events, Poller.capacity, t))
        var kept = 0
        for i in 0..<n {
            if events[i].data == UInt64(UInt32(bitPattern: wakeReadFD)) {
                ccoro_poll_drain_wake(wakeReadFD)
            } else {
                if kept != i { events[kept] = events[i] }
                kept += 1
            }
        }
        return kept
    }
}
