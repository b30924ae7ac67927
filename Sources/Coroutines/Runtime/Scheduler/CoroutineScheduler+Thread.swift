import CCoroutines
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension CoroutineScheduler {
    /// Starts the dedicated or pool thread that drives this scheduler until it is stopped. In a
    /// forked child it starts none (``ForkGuard``): nothing launched there can run anyway.
    func startThread() {
        if ForkGuard.isForkedChild { return }
        let nice = Self.niceValue(for: qos)
        // A pool scheduler's thread keeps its pool alive (the scheduler does not retain it).
        let pool = self.pool
        spawnThread(name: name) { [self] in
            #if canImport(Glibc)
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(ccoro_thread_id()), nice)
            #endif
            withExtendedLifetime(pool) {
                drive {
                    self.lifecycle.load().isStopRequested && self.liveCount == 0
                        && !self.hasLocalLaunches
                }
                close()
            }
        }
    }

    /// The nice value libdispatch uses for a QoS class on Linux.
    static func niceValue(for qos: DispatchQoS.QoSClass) -> Int32 {
        switch qos {
        case .userInteractive, .userInitiated: -2
        case .utility: 2
        case .background: 10
        default: 0
        }
    }
}

/// The body of a thread started by `spawnThread`.
private final class ThreadBody {
    let name: String
    let body: () -> Void
    init(name: String, body: @escaping () -> Void) { self.name = name; self.body = body }
}

/// Starts a detached thread named `name` running `body`.
func spawnThread(name: String, _ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadBody(name: name, body: body)).toOpaque()
    let rc = ccoro_thread_start({ arg in
        let b = Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue()
        ccoro_set_thread_name(b.name)
        b.body()
    }, box)
    precondition(rc == 0, "cannot start a thread: error \(rc)")
}

/// Whether the calling thread is the process's main thread.
func isMainThread() -> Bool {
    #if canImport(Glibc)
    return UInt64(getpid()) == ccoro_thread_id()
    #else
    return pthread_main_np() != 0
    #endif
}
