import CCoroutines

extension Select {
    /// Runs the select for coroutine `c` (Go runtime `selectgo`).
    @inlinable
    consuming func run(in c: Coroutine) throws -> Outcome {
        try c.checkInterrupts()
        let cases = self.cases
        let otherwiseBody = self.otherwiseBody
        let timeoutBody = self.timeoutBody
        let timeoutDeadline = self.timeoutDeadline
        let n = cases.count
        let timeoutReady = timeoutBody != nil && timeoutDeadline <= ccoro_now_ns()
        // Scratch memory on this coroutine's stack for the values: one slot shared by the receive
        // cases (only the winning case's slot is ever written), then one per send case.
        var scratchSize = 0, scratchAlignment = 1
        for selectCase in cases where !selectCase.isSend {
            scratchSize = Swift.max(scratchSize, selectCase.elementSize)
            scratchAlignment = Swift.max(scratchAlignment, selectCase.elementAlignment)
        }
        for selectCase in cases where selectCase.isSend {
            let a = selectCase.elementAlignment
            scratchSize = (scratchSize + a - 1) / a * a
            selectCase.scratchOffset = scratchSize
            scratchSize += selectCase.elementSize
            scratchAlignment = Swift.max(scratchAlignment, a)
        }
        return try withUnsafeTemporaryAllocation(byteCount: Swift.max(scratchSize, 1), alignment: scratchAlignment) { scratchBuffer in
        let scratch = scratchBuffer.baseAddress.unsafelyUnwrapped
        return try withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer.self, capacity: Swift.max(n, 1)) { locks in
            let lockCount = selectLockOrder(cases, locks)
            for k in 0..<lockCount { selectCore(locks[k]).lock.lock() }

            // Pass 1: poll in a random order, so that a ready case is chosen uniformly.
            let polled: Int? = withUnsafeTemporaryAllocation(of: Int.self, capacity: n + 1) { order in
                let total = n + (timeoutReady ? 1 : 0)
                c.scheduler.randomPermutation(order, count: total)
                for k in 0..<total {
                    let i = order[k]
                    if i == n || cases[i].ops.poll(cases[i], scratch) { return i }
                }
                return nil
            }
            if let i = polled {
                selectUnlock(locks, lockCount)
                if i == n { return try timeoutBody!() }
                return try cases[i].ops.finishPolled(cases[i], scratch)
            }
            if let otherwiseBody {
                selectUnlock(locks, lockCount)
                return try otherwiseBody()
            }

            // Pass 2: publish one waiter per case, all with the same ticket, and suspend.
            var outcome = WaitOutcome()
            let winner: Int = try withUnsafeMutablePointer(to: &outcome) { o in
                let ticket = c.arm()
                for i in 0..<n { cases[i].ops.enqueue(cases[i], ticket, o, i, scratch) }
                selectUnlock(locks, lockCount)
                let timer = timeoutBody == nil ? nil
                    : c.scheduler.scheduleSelectTimeout(deadline: timeoutDeadline, ticket, o, index: n)
                defer { if let timer { c.scheduler.cancelSelectTimeout(timer) } }
                // The published copies of the send cases' values are destroyed once no waiter can
                // read them any more: after every waiter was withdrawn (or taken by the waker,
                // which copied the value under the channel's lock before waking this coroutine).
                defer { for i in 0..<n where cases[i].isSend { cases[i].ops.discard(cases[i], scratch) } }
                try c.suspend(armed: ticket, .select) { t in
                    for i in 0..<n { cases[i].ops.withdraw(cases[i], t) }
                }
                // Won: withdraw the other cases' waiters (the winner's was taken by its waker).
                let winner = o.pointee.caseIndex
                for i in 0..<n where i != winner { cases[i].ops.withdraw(cases[i], ticket) }
                return winner
            }
            if winner == n { return try timeoutBody!() }
            precondition(cases.indices.contains(winner), "internal inconsistency: select woken without a winning case")
            return try cases[winner].ops.finishWoken(cases[winner], outcome.closed, scratch)
        }
        }
    }
}

/// Writes the distinct channel locks of `cases` into `locks` in address order (Go's
/// `sellock`), so that two selects over the same channels never deadlock. Returns their number.
@inlinable
func selectLockOrder<Outcome>(_ cases: [SelectCase<Outcome>], _ locks: UnsafeMutableBufferPointer<UnsafeMutableRawPointer>) -> Int {
    var count = 0
    for c in cases {
        let p = Unmanaged.passUnretained(c.core).toOpaque()
        // Insertion sort: selects have a handful of cases.
        var j = count
        while j > 0 && locks[j - 1] > p { j -= 1 }
        if j > 0 && locks[j - 1] == p { continue }          // the same channel twice
        var k = count
        while k > j { locks[k] = locks[k - 1]; k -= 1 }
        locks[j] = p
        count += 1
    }
    return count
}

@inlinable
func selectCore(_ p: UnsafeMutableRawPointer) -> ChannelCore {
    Unmanaged<ChannelCore>.fromOpaque(p).takeUnretainedValue()
}

@inlinable
func selectUnlock(_ locks: UnsafeMutableBufferPointer<UnsafeMutableRawPointer>, _ count: Int) {
    var k = count
    while k > 0 {
        k -= 1
        selectCore(locks[k]).lock.unlock()
    }
}

/// The operations of one select case, as closures formed where the element type is known, so
/// that they run specialised code (a generic class's overridden methods would run unspecialised
/// code through the vtable). The closures capture nothing: they take the case as an argument.
@usableFromInline
struct SelectCaseOps<Outcome> {
    // Every operation gets the select's scratch memory: a receive case uses the shared slot at
    // its start, a send case its own slot at `scratchOffset`.

    /// Under the channel's lock: completes the operation now if it can (Go's pass 1).
    @usableFromInline let poll: (SelectCase<Outcome>, UnsafeMutableRawPointer) -> Bool
    /// Under the channel's lock: publishes a waiter (Go's pass 2).
    @usableFromInline let enqueue: (SelectCase<Outcome>, WaitTicket, UnsafeMutablePointer<WaitOutcome>, Int,
                                    UnsafeMutableRawPointer) -> Void
    /// Takes the lock and removes the waiter published with the ticket, if still queued.
    @usableFromInline let withdraw: (SelectCase<Outcome>, WaitTicket) -> Void
    /// After unlocking, for a case completed by `poll`: wakes the peer, runs the body.
    @usableFromInline let finishPolled: (SelectCase<Outcome>, UnsafeMutableRawPointer) throws -> Outcome
    /// After a wake that chose this case (the flag: the channel closed).
    @usableFromInline let finishWoken: (SelectCase<Outcome>, Bool, UnsafeMutableRawPointer) throws -> Outcome
    /// After a wait: destroys the copy of a send case's value published in the scratch memory.
    @usableFromInline let discard: (SelectCase<Outcome>, UnsafeMutableRawPointer) -> Void

    @inlinable
    init(poll: @escaping (SelectCase<Outcome>, UnsafeMutableRawPointer) -> Bool,
         enqueue: @escaping (SelectCase<Outcome>, WaitTicket, UnsafeMutablePointer<WaitOutcome>, Int,
                             UnsafeMutableRawPointer) -> Void,
         withdraw: @escaping (SelectCase<Outcome>, WaitTicket) -> Void,
         finishPolled: @escaping (SelectCase<Outcome>, UnsafeMutableRawPointer) throws -> Outcome,
         finishWoken: @escaping (SelectCase<Outcome>, Bool, UnsafeMutableRawPointer) throws -> Outcome,
         discard: @escaping (SelectCase<Outcome>, UnsafeMutableRawPointer) -> Void = { _, _ in }) {
        self.poll = poll
        self.enqueue = enqueue
        self.withdraw = withdraw
        self.finishPolled = finishPolled
        self.finishWoken = finishWoken
        self.discard = discard
    }
}

/// One case of a select, type-erased over its channel's element type.
@usableFromInline
class SelectCase<Outcome> {
    @usableFromInline let core: ChannelCore
    @usableFromInline let ops: SelectCaseOps<Outcome>
    @usableFromInline let isSend: Bool
    @usableFromInline let elementSize: Int
    @usableFromInline let elementAlignment: Int
    /// Where a send case's value lives in the scratch memory while the select waits.
    @usableFromInline @exclusivity(unchecked) var scratchOffset = 0
    /// A blocked peer whose operation `poll` completed (claimed): woken after unlocking.
    @usableFromInline @exclusivity(unchecked) var peer: WaitTicket?
    /// `poll` found the channel closed.
    @usableFromInline @exclusivity(unchecked) var closedAtPoll = false

    @inlinable
    init<Element>(core: ChannelCore, element: Element.Type, isSend: Bool, ops: SelectCaseOps<Outcome>) {
        self.core = core
        self.ops = ops
        self.isSend = isSend
        elementSize = MemoryLayout<Element>.size
        elementAlignment = MemoryLayout<Element>.alignment
    }
}

/// A receive case. It holds no value of its element type (the value lives in the select's
/// scratch memory), so releasing it needs no generic metadata.
@usableFromInline
final class ReceiveCase<Element, Outcome>: SelectCase<Outcome> {
    @usableFromInline let storage: ChannelStorage<Element>
    @usableFromInline let body: (Element?) throws -> Outcome

    @inlinable init(_ storage: ChannelStorage<Element>, _ body: @escaping (Element?) throws -> Outcome) {
        self.storage = storage
        self.body = body
        super.init(core: storage, element: Element.self, isSend: false, ops: SelectCaseOps(
            poll: { unsafeDowncast($0, to: Self.self).poll($1) },
            enqueue: { unsafeDowncast($0, to: Self.self).enqueue($1, $2, index: $3, $4) },
            withdraw: { unsafeDowncast($0, to: Self.self).storage.withdrawReceiver($1) },
            finishPolled: { try unsafeDowncast($0, to: Self.self).finishPolled($1) },
            finishWoken: { try unsafeDowncast($0, to: Self.self).finishWoken(closed: $1, $2) }))
    }

    @inlinable func poll(_ scratch: UnsafeMutableRawPointer) -> Bool {
        switch storage.state.receive() {
        case .value(let v, let sender):
            scratch.assumingMemoryBound(to: Element.self).initialize(to: v)
            peer = sender
            return true
        case .closed:
            closedAtPoll = true
            return true
        case .empty:
            return false
        }
    }

    @inlinable func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int,
                            _ scratch: UnsafeMutableRawPointer) {
        storage.state.receivers.append(ChannelWaiter(ticket: ticket, element: scratch, outcome: outcome,
                                                     caseIndex: index))
    }

    @inlinable func finishPolled(_ scratch: UnsafeMutableRawPointer) throws -> Outcome {
        if closedAtPoll { return try body(nil) }
        peer.take()?.wakeClaimed()
        return try body(scratch.assumingMemoryBound(to: Element.self).move())
    }

    @inlinable func finishWoken(closed: Bool, _ scratch: UnsafeMutableRawPointer) throws -> Outcome {
        if closed { return try body(nil) }
        return try body(scratch.assumingMemoryBound(to: Element.self).move())
    }
}

/// A send case.
@usableFromInline
final class SendCase<Element, Outcome>: SelectCase<Outcome> {
    @usableFromInline let storage: ChannelStorage<Element>
    @usableFromInline let body: () throws -> Outcome
    @usableFromInline let value: Element

    @inlinable init(_ value: Element, _ storage: ChannelStorage<Element>, _ body: @escaping () throws -> Outcome) {
        self.value = value
        self.storage = storage
        self.body = body
        super.init(core: storage, element: Element.self, isSend: true, ops: SelectCaseOps(
            poll: { p, _ in unsafeDowncast(p, to: Self.self).poll() },
            enqueue: { unsafeDowncast($0, to: Self.self).enqueue($1, $2, index: $3, $4) },
            withdraw: { unsafeDowncast($0, to: Self.self).storage.withdrawSender($1) },
            finishPolled: { p, _ in try unsafeDowncast(p, to: Self.self).finishPolled() },
            finishWoken: { p, closed, _ in try unsafeDowncast(p, to: Self.self).finishWoken(closed: closed) },
            discard: { p, scratch in unsafeDowncast(p, to: Self.self).discardPublished(scratch) }))
    }

    @inlinable func poll() -> Bool {
        switch storage.state.send(value) {
        case .delivered(let receiver):
            peer = receiver
            return true
        case .buffered:
            return true
        case .closed:
            closedAtPoll = true
            return true
        case .full:
            return false
        }
    }

    /// Publishes a copy of the value in the scratch memory, which receivers copy from.
    @inlinable func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int,
                            _ scratch: UnsafeMutableRawPointer) {
        let published = (scratch + scratchOffset).assumingMemoryBound(to: Element.self)
        published.initialize(to: value)
        storage.state.senders.append(ChannelWaiter(ticket: ticket, element: UnsafeMutableRawPointer(published),
                                                   outcome: outcome, caseIndex: index))
    }

    @inlinable func finishPolled() throws -> Outcome {
        if closedAtPoll { throw ChannelError.closed }
        peer.take()?.wakeClaimed()
        return try body()
    }

    @inlinable func finishWoken(closed: Bool) throws -> Outcome {
        if closed { throw ChannelError.closed }
        return try body()
    }

    @inlinable func discardPublished(_ scratch: UnsafeMutableRawPointer) {
        (scratch + scratchOffset).assumingMemoryBound(to: Element.self).deinitialize(count: 1)
    }
}
