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
        return try withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer.self, capacity: Swift.max(n, 1)) { locks in
            let lockCount = selectLockOrder(cases, locks)
            for k in 0..<lockCount { selectCore(locks[k]).lock.lock() }

            // Pass 1: poll in a random order, so that a ready case is chosen uniformly.
            let polled: Int? = withUnsafeTemporaryAllocation(of: Int.self, capacity: n + 1) { order in
                let total = n + (timeoutReady ? 1 : 0)
                c.scheduler.randomPermutation(order, count: total)
                for k in 0..<total {
                    let i = order[k]
                    if i == n || cases[i].ops.poll(cases[i]) { return i }
                }
                return nil
            }
            if let i = polled {
                selectUnlock(locks, lockCount)
                if i == n { return try timeoutBody!() }
                return try cases[i].ops.finishPolled(cases[i])
            }
            if let otherwiseBody {
                selectUnlock(locks, lockCount)
                return try otherwiseBody()
            }

            // Pass 2: publish one waiter per case, all with the same ticket, and suspend.
            var outcome = WaitOutcome()
            let winner: Int = try withUnsafeMutablePointer(to: &outcome) { o in
                let ticket = c.arm()
                for i in 0..<n { cases[i].ops.enqueue(cases[i], ticket, o, i) }
                selectUnlock(locks, lockCount)
                let timer = timeoutBody == nil ? nil
                    : c.scheduler.scheduleSelectTimeout(deadline: timeoutDeadline, ticket, o, index: n)
                defer { if let timer { c.scheduler.cancelSelectTimeout(timer) } }
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
            return try cases[winner].ops.finishWoken(cases[winner], outcome.closed)
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
    /// Under the channel's lock: completes the operation now if it can (Go's pass 1).
    @usableFromInline let poll: (SelectCase<Outcome>) -> Bool
    /// Under the channel's lock: publishes a waiter (Go's pass 2).
    @usableFromInline let enqueue: (SelectCase<Outcome>, WaitTicket, UnsafeMutablePointer<WaitOutcome>, Int) -> Void
    /// Takes the lock and removes the waiter published with the ticket, if still queued.
    @usableFromInline let withdraw: (SelectCase<Outcome>, WaitTicket) -> Void
    /// After unlocking, for a case completed by `poll`: wakes the peer, runs the body.
    @usableFromInline let finishPolled: (SelectCase<Outcome>) throws -> Outcome
    /// After a wake that chose this case (the flag: the channel closed).
    @usableFromInline let finishWoken: (SelectCase<Outcome>, Bool) throws -> Outcome

    @inlinable
    init(poll: @escaping (SelectCase<Outcome>) -> Bool,
         enqueue: @escaping (SelectCase<Outcome>, WaitTicket, UnsafeMutablePointer<WaitOutcome>, Int) -> Void,
         withdraw: @escaping (SelectCase<Outcome>, WaitTicket) -> Void,
         finishPolled: @escaping (SelectCase<Outcome>) throws -> Outcome,
         finishWoken: @escaping (SelectCase<Outcome>, Bool) throws -> Outcome) {
        self.poll = poll
        self.enqueue = enqueue
        self.withdraw = withdraw
        self.finishPolled = finishPolled
        self.finishWoken = finishWoken
    }
}

/// One case of a select, type-erased over its channel's element type.
@usableFromInline
class SelectCase<Outcome> {
    @usableFromInline let core: ChannelCore
    @usableFromInline let ops: SelectCaseOps<Outcome>

    @inlinable init(core: ChannelCore, ops: SelectCaseOps<Outcome>) {
        self.core = core
        self.ops = ops
    }
}

@usableFromInline
final class ReceiveCase<Element, Outcome>: SelectCase<Outcome> {
    @usableFromInline let storage: ChannelStorage<Element>
    @usableFromInline let body: (Element?) throws -> Outcome
    @usableFromInline var polled: Element?
    @usableFromInline var peer: WaitTicket?
    /// The slot a sender fills while the select waits (stable memory; allocated on demand).
    @usableFromInline var slot: UnsafeMutablePointer<Element?>?

    @inlinable init(_ storage: ChannelStorage<Element>, _ body: @escaping (Element?) throws -> Outcome) {
        self.storage = storage
        self.body = body
        super.init(core: storage, ops: SelectCaseOps(
            poll: { unsafeDowncast($0, to: Self.self).poll() },
            enqueue: { unsafeDowncast($0, to: Self.self).enqueue($1, $2, index: $3) },
            withdraw: { unsafeDowncast($0, to: Self.self).withdraw($1) },
            finishPolled: { try unsafeDowncast($0, to: Self.self).finishPolled() },
            finishWoken: { try unsafeDowncast($0, to: Self.self).finishWoken(closed: $1) }))
    }

    deinit {
        slot?.deinitialize(count: 1)
        slot?.deallocate()
    }

    @inlinable func poll() -> Bool {
        switch storage.state.receive() {
        case .value(let v, let sender):
            polled = v
            peer = sender
            return true
        case .closed:
            return true
        case .empty:
            return false
        }
    }

    @inlinable func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int) {
        let slot = self.slot ?? {
            let p = UnsafeMutablePointer<Element?>.allocate(capacity: 1)
            p.initialize(to: nil)
            self.slot = p
            return p
        }()
        storage.state.receivers.append(ChannelWaiter(ticket: ticket, element: UnsafeMutableRawPointer(slot),
                                                     outcome: outcome, caseIndex: index))
    }

    @inlinable func withdraw(_ ticket: WaitTicket) { storage.withdrawReceiver(ticket) }

    @inlinable func finishPolled() throws -> Outcome {
        peer?.wakeClaimed()
        return try body(polled)
    }

    @inlinable func finishWoken(closed: Bool) throws -> Outcome {
        let value = slot?.pointee
        slot?.pointee = nil
        precondition(closed || value != nil, "internal inconsistency: a select receive was woken without a value")
        return try body(value)
    }
}

@usableFromInline
final class SendCase<Element, Outcome>: SelectCase<Outcome> {
    @usableFromInline let storage: ChannelStorage<Element>
    @usableFromInline let body: () throws -> Outcome
    @usableFromInline let value: Element
    @usableFromInline var closedAtPoll = false
    @usableFromInline var peer: WaitTicket?
    /// The value a receiver copies while the select waits (stable memory; allocated on demand).
    @usableFromInline var published: UnsafeMutablePointer<Element>?

    @inlinable init(_ value: Element, _ storage: ChannelStorage<Element>, _ body: @escaping () throws -> Outcome) {
        self.value = value
        self.storage = storage
        self.body = body
        super.init(core: storage, ops: SelectCaseOps(
            poll: { unsafeDowncast($0, to: Self.self).poll() },
            enqueue: { unsafeDowncast($0, to: Self.self).enqueue($1, $2, index: $3) },
            withdraw: { unsafeDowncast($0, to: Self.self).withdraw($1) },
            finishPolled: { try unsafeDowncast($0, to: Self.self).finishPolled() },
            finishWoken: { try unsafeDowncast($0, to: Self.self).finishWoken(closed: $1) }))
    }

    deinit {
        published?.deinitialize(count: 1)
        published?.deallocate()
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

    @inlinable func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int) {
        let p = published ?? {
            let p = UnsafeMutablePointer<Element>.allocate(capacity: 1)
            p.initialize(to: value)
            published = p
            return p
        }()
        storage.state.senders.append(ChannelWaiter(ticket: ticket, element: UnsafeMutableRawPointer(p),
                                                   outcome: outcome, caseIndex: index))
    }

    @inlinable func withdraw(_ ticket: WaitTicket) { storage.withdrawSender(ticket) }

    @inlinable func finishPolled() throws -> Outcome {
        if closedAtPoll { throw ChannelError.closed }
        peer?.wakeClaimed()
        return try body()
    }

    @inlinable func finishWoken(closed: Bool) throws -> Outcome {
        if closed { throw ChannelError.closed }
        return try body()
    }
}
