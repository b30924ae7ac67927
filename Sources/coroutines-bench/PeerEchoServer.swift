import CCoroutines
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A readiness reactor for Swift tasks: one thread waits in epoll/kqueue (CCoroutines' poll shim,
/// as our schedulers do) and resumes the continuation of the task waiting on each descriptor.
/// One waiter per descriptor at a time (an echo connection either reads or writes).
final class TaskReactor: @unchecked Sendable {
    private let pollFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private struct State {
        var waiters: [Int32: UnsafeContinuation<Void, Never>] = [:]
        var isStopped = false
    }
    private let state = Mutex(State())
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init() {
        var r: Int32 = -1, w: Int32 = -1
        pollFD = ccoro_poll_create(&r, &w)
        precondition(pollFD >= 0, "cannot create a poller")
        wakeRead = r
        wakeWrite = w
        let thread = Thread { [self] in loop() }
        thread.name = "task-reactor"
        thread.start()
    }

    /// Suspends the task until `fd` is readable (or writable).
    func wait(_ fd: Int32, writable: Bool) async {
        await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in
            let registered = state.withLock { s in
                guard !s.isStopped else { return false }
                s.waiters[fd] = c
                return true
            }
            guard registered else { return c.resume() }
            if ccoro_poll_arm(pollFD, fd, writable ? 0 : 1, writable ? 1 : 0) != 0 {
                state.withLock { $0.waiters.removeValue(forKey: fd) }?.resume()
            }
        }
    }

    /// Stops watching `fd` (call before closing it).
    func forget(_ fd: Int32) { ccoro_poll_disarm(pollFD, fd) }

    /// Ends the thread and resumes every waiter, now and later (they re-check and see the server
    /// stopping). Call ``close()`` once no task uses the reactor any more.
    func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        ccoro_poll_wake(wakeWrite)
        finished.wait()
        let left = state.withLock { s in
            s.isStopped = true
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for c in left { c.resume() }
    }

    func close() {
        _ = Glibc.close(pollFD)
        _ = Glibc.close(wakeRead)
        if wakeWrite != wakeRead { _ = Glibc.close(wakeWrite) }
    }

    private func loop() {
        let events = UnsafeMutablePointer<ccoro_poll_event>.allocate(capacity: 64)
        defer { events.deallocate(); finished.signal() }
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let n = Int(ccoro_poll_wait(pollFD, events, 64, -1))
            for i in 0..<max(n, 0) {
                let fd = Int32(truncatingIfNeeded: events[i].data)   // one-shot interest: the datum is the fd
                if fd == wakeRead { ccoro_poll_drain_wake(wakeRead); continue }
                state.withLock { $0.waiters.removeValue(forKey: fd) }?.resume()
            }
        }
    }
}

/// The Swift-concurrency echo server of the `echo` benchmark: a task per connection (a
/// discarding task group), non-blocking descriptors, readiness from ``TaskReactor``.
final class PeerEchoServer: @unchecked Sendable {
    let port: Int
    private let listenFD: Int32
    private let reactor = TaskReactor()
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1024) == 0 else {
            close(fd)
            throw BenchError.child("peer listen failed: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        makeNonBlocking(fd)
        listenFD = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Task { [self] in
            await withDiscardingTaskGroup { group in
                while !stopping.load(ordering: .sequentiallyConsistent) {
                    let fd = accept(listenFD, nil, nil)
                    if fd >= 0 {
                        makeNonBlocking(fd)
                        var one: Int32 = 1
                        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                        group.addTask { await self.serve(fd) }
                    } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                        await reactor.wait(listenFD, writable: false)
                    } else {
                        break
                    }
                }
            }
            done.signal()
        }
    }

    private func serve(_ fd: Int32) async {
        let size = 16 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate(); reactor.forget(fd); close(fd) }
        while !stopping.load(ordering: .relaxed) {
            let n = recv(fd, buffer, size, 0)
            if n == 0 { return }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                    await reactor.wait(fd, writable: false)
                    continue
                }
                return
            }
            var offset = 0
            while offset < n {
                let w = send(fd, buffer + offset, n - offset, Int32(MSG_NOSIGNAL))
                if w > 0 { offset += w; continue }
                if w < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                    await reactor.wait(fd, writable: true)
                    continue
                }
                return
            }
        }
    }

    /// Stops accepting (the clients have already closed their connections) and waits for the tasks.
    func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        reactor.stop()
        done.wait()
        reactor.close()
        close(listenFD)
    }
}

private func makeNonBlocking(_ fd: Int32) {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
}
