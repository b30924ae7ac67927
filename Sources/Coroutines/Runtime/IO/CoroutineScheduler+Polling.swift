import CCoroutines

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Polling for readiness: the loop's call into the poller, and the delivery of what it
/// reports to the waiting coroutines (sockets: ``PollTable``; other descriptors: `ioWaiters`)
/// and, on ``main``, to the blocks queued on `DispatchQueue.main`.
extension CoroutineScheduler {
    /// Waits up to `timeout` nanoseconds (nil: until something happens; 0: just looks) for
    /// readiness, and wakes the coroutines waiting for it. Scheduler thread only.
    func poll(timeout: UInt64?) {
        let n = poller.wait(timeoutNanoseconds: timeout)
        for i in 0..<n {
            let ev = poller.events[i]
            if PollTable.isTagged(ev.data) {
                pollTable.deliver(datum: ev.data, readable: ev.readable != 0, writable: ev.writable != 0)
                continue
            }
            let fd = Int32(truncatingIfNeeded: ev.data)
            if fd == mainQueueFD {
                var value: UInt64 = 0
                _ = read(mainQueueFD, &value, 8)
                ccoro_dispatch_main_queue_drain()
                continue
            }
            guard var w = ioWaiters[fd] else { continue }
            var readers = WaiterList<WaitTicket>(), writers = WaiterList<WaitTicket>()
            if ev.readable != 0 { swap(&readers, &w.readers) }
            if ev.writable != 0 { swap(&writers, &w.writers) }
            if w.isEmpty {
                ioWaiters[fd] = nil
            } else {
                ioWaiters[fd] = w
                _ = poller.arm(fd: fd, readable: !w.readers.isEmpty, writable: !w.writers.isEmpty)
            }
            readers.forEach { $0.resume() }   // a tombstone's claim fails: skipped
            writers.forEach { $0.resume() }
        }
    }
}
