import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

private typealias Kit = CoroutineTestKit

/// Waits for `descriptor` to become readable and reports whether the wait suspended (the ticket is
/// published only when it does).
private func waitReadable(_ descriptor: PollDescriptor) throws -> Bool {
    var suspended = false
    try descriptor.wait(writable: false) { _ in
        suspended = true
        return true
    }
    return suspended
}

private func writeByte(_ fd: Int32) {
    var byte: UInt8 = 0x2A
    precondition(write(fd, &byte, 1) == 1)
}

private func readByte(_ fd: Int32) -> Int {
    var byte: UInt8 = 0
    return read(fd, &byte, 1)
}

/// Runs `body` as a coroutine on a dedicated scheduler (under ``CoroutineTestKit/run``'s
/// watchdog) and rethrows what it throws.
private func onScheduler(_ name: String, _ body: @escaping @Sendable (CoroutineScheduler) throws -> Void) async throws {
    try await Kit.withScheduler(name) { scheduler in
        try await Kit.run { try Coroutine.async(on: scheduler) { try body(scheduler) }.await() }
    }
}

@Suite("Edge-triggered descriptor registrations (PollDescriptor)")
struct PollDescriptorTests {
    @Test("an edge that arrives while nobody waits is remembered: the next wait returns without suspending")
    func edgeWhileNobodyWaitsIsRemembered() async throws {
        let pipe = try Kit.makePipe()
        defer { close(pipe.read); close(pipe.write) }
        try await onScheduler("poll-edge") { scheduler in
            let descriptor = PollDescriptor(fd: pipe.read)
            // The first wait registers the pipe here; nothing is readable yet.
            #expect(throws: CoroutineError.timedOut) {
                try Coroutine.withTimeout(.milliseconds(20)) { _ = try waitReadable(descriptor) }
            }
            writeByte(pipe.write)
            // Nothing else runs on this scheduler: its loop blocks in the poller during the
            // delay, and the poller reports the edge while no coroutine waits.
            try Coroutine.delay(.milliseconds(5))
            let suspended = try Coroutine.withTimeout(hangBound) { try waitReadable(descriptor) }
            #expect(!suspended, "the remembered edge should end the wait at once")
            #expect(readByte(pipe.read) == 1)
            // The edge was consumed and no new one came: the next wait suspends until one does.
            #expect(throws: CoroutineError.timedOut) {
                try Coroutine.withTimeout(.milliseconds(20)) { _ = try waitReadable(descriptor) }
            }
            writeByte(pipe.write)
            #expect(try Coroutine.withTimeout(hangBound) { try waitReadable(descriptor) })
            #expect(readByte(pipe.read) == 1)
        }
    }

    @Test("a descriptor number reused by another descriptor inherits neither readiness nor waiters")
    func reusedNumberStartsClean() async throws {
        let a = try Kit.makePipe()
        let b = try Kit.makePipe()
        defer { close(a.read); close(a.write); close(b.write) }
        try await onScheduler("poll-reuse") { scheduler in
            let old = PollDescriptor(fd: a.read)
            writeByte(a.write)
            // Registers pipe a here; the registration reports the byte already there.
            _ = try Coroutine.withTimeout(hangBound) { try waitReadable(old) }
            writeByte(a.write)
            try Coroutine.delay(.milliseconds(5))   // the poller reports the edge: `old` is ready
            let parked = Coroutine.launch(on: scheduler) {
                // Consumes the readiness, then parks: nothing more arrives on pipe a.
                _ = try waitReadable(old)
                _ = try waitReadable(old)
            }
            try Coroutine.yield()
            #expect(!parked.isFinished)
            // The number of a.read now names pipe b's read end (dup2 replaces it atomically;
            // the kernel drops pipe a's registration as its read end closes).
            #expect(dup2(b.read, a.read) == a.read)
            close(b.read)
            let new = PollDescriptor(fd: a.read)
            #expect(new.id != old.id)
            // Registering `new` resumes the stale waiter (it re-checks its own state) …
            #expect(throws: CoroutineError.timedOut) {
                try Coroutine.withTimeout(.milliseconds(20)) { _ = try waitReadable(new) }
            }
            try parked.join()
            #expect(parked.error == nil)
            // … and `new` did not inherit `old`'s readiness: it waits for pipe b's own edge.
            writeByte(b.write)
            #expect(try Coroutine.withTimeout(hangBound) { try waitReadable(new) })
            #expect(readByte(a.read) == 1)
        }
    }

    /// The race between readiness and cancellation (<doc:Cancellation>): the edge that loses it
    /// is remembered, as <doc:WaitingForDescriptors> says of the sockets' registrations.
    @Test("an edge delivered after a cancellation claimed the waiter is remembered for the next wait")
    func edgeLosingTheClaimIsRemembered() async throws {
        let pipe = try Kit.makePipe()
        defer { close(pipe.read); close(pipe.write) }
        try await onScheduler("poll-claim") { scheduler in
            let descriptor = PollDescriptor(fd: pipe.read)
            let waiter = Coroutine.launch(on: scheduler) { _ = try waitReadable(descriptor) }
            try Coroutine.yield()   // the waiter parks in the table
            #expect(!waiter.isFinished)
            // More than one run-queue batch (128) of coroutines ahead of the waiter, so that
            // the loop polls — and delivers the edge — before the cancelled waiter runs.
            for _ in 0..<200 { Coroutine.launch(on: scheduler) {} }
            // While this thread is held, another one cancels the waiter (claiming its ticket)
            // and then writes: the edge can only reach the poller after the claim.
            let done = DispatchSemaphore(value: 0)
            Thread {
                waiter.cancel()
                writeByte(pipe.write)
                done.signal()
            }.start()
            done.wait()
            try waiter.join()
            #expect(waiter.error is CancellationError)
            // No further edge will come: only the remembered one can end this wait.
            let suspended = try Coroutine.withTimeout(hangBound) { try waitReadable(descriptor) }
            #expect(!suspended, "the edge that lost the claim should have been remembered")
            #expect(readByte(pipe.read) == 1)
        }
    }

    @Test("a timeout or cancellation during a wait leaves the registration usable, and a racing edge is not lost")
    func interruptedWaitsThenSuccessfulWait() async throws {
        let writer = CoroutineScheduler(name: "poll-writer")
        defer { writer.stop() }
        let pipe = try Kit.makePipe()
        defer { close(pipe.read); close(pipe.write) }
        try await onScheduler("poll-interrupt") { scheduler in
            let descriptor = PollDescriptor(fd: pipe.read)
            // Cancellation of a parked waiter, then a wait that succeeds.
            let cancelled = Coroutine.launch(on: scheduler) { _ = try waitReadable(descriptor) }
            try Coroutine.yield()
            cancelled.cancel()
            try cancelled.join()
            #expect(cancelled.error is CancellationError)
            writeByte(pipe.write)
            _ = try Coroutine.withTimeout(hangBound) { try waitReadable(descriptor) }
            #expect(readByte(pipe.read) == 1)
            // Timeouts racing with edges written from another thread: an edge that loses the
            // race to the timeout stays remembered, so every byte is eventually waited for.
            let rounds = 300
            let feeder = Coroutine.launch(on: writer) {
                for i in 0..<rounds {
                    writeByte(pipe.write)
                    if i % 7 == 0 { try Coroutine.yield() }
                }
            }
            var received = 0
            var attempt = 0
            // Bytes are read only after a wait ended by readiness (draining to EAGAIN, as the
            // edge-triggered contract asks). A lost edge would leave bytes unread with no edge
            // to come: the waits would time out until the deadline.
            let deadline = ContinuousClock.now + .seconds(20)
            while received < rounds {
                attempt += 1
                do {
                    try Coroutine.withTimeout(.microseconds(Int64(attempt % 6) * 20)) {
                        _ = try waitReadable(descriptor)
                    }
                } catch CoroutineError.timedOut {
                    if ContinuousClock.now > deadline { break }
                    continue
                }
                while readByte(pipe.read) == 1 { received += 1 }
            }
            #expect(received == rounds, "an edge was lost: \(received) of \(rounds) bytes waited for")
            try feeder.join()
        }
    }

    /// A regression test: it failed before its fix.
    @Test("two coroutines waiting for the same descriptor are both woken when it becomes readable")
    func twoReadersOneDescriptor() async throws {
        let (r, w) = try Kit.makePipe()
        defer { close(r); close(w) }
        let woken = try await Kit.run {
            // Given two coroutines suspended in waitUntilReadable on one pipe
            let count = Kit.Counter()
            let a = Coroutine.launch(name: "reader-A") { try Coroutine.waitUntilReadable(r); _ = count.increment() }
            let b = Coroutine.launch(name: "reader-B") { try Coroutine.waitUntilReadable(r); _ = count.increment() }
            try Coroutine.yield()
            try Coroutine.yield()
            // When one byte arrives
            var byte: UInt8 = 1
            _ = write(w, &byte, 1)
            // Then both return
            try Coroutine.withTimeout(hangBound) {
                try a.join()
                try b.join()
            }
            return count.value
        }
        #expect(woken == 2)
    }
}
