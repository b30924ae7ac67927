import CCoroutines

extension Select {
    /// Runs the select for coroutine `c` (Go runtime `selectgo`).
    consuming func run(in c: Coroutine) throws -> Outcome {
        try c.checkInterrupts()
        let timeoutIndex = cases.count
        let timeoutReady = timeoutBody != nil && timeoutDeadline <= ccoro_now_ns()
        let cores = lockOrder()
        for core in cores { core.lock.lock() }

        // Pass 1: poll in a random order, so that a ready case is chosen uniformly.
        var order = Array(0..<(cases.count + (timeoutReady ? 1 : 0)))
        c.scheduler.shuffle(&order)
        for i in order {
            if i == timeoutIndex {
                unlock(cores)
                return try timeoutBody!()
            }
            if cases[i].poll() {
                unlock(cores)
                return try cases[i].finishPolled()
            }
        }
        if let otherwiseBody {
            unlock(cores)
            return try otherwiseBody()
        }

        // Pass 2: publish one waiter per case, all with the same ticket, and suspend.
        var outcome = WaitOutcome()
        let cases = self.cases
        let timeoutBody = self.timeoutBody
        let timeoutDeadline = self.timeoutDeadline
        let winner: Int = try withUnsafeMutablePointer(to: &outcome) { o in
            let ticket = c.arm()
            for (i, selectCase) in cases.enumerated() { selectCase.enqueue(ticket, o, index: i) }
            unlock(cores)
            var timer: TimerNode?
            if timeoutBody != nil {
                timer = c.scheduler.timers.schedule(deadline: timeoutDeadline) {
                    guard ticket.tryClaim() else { return }
                    o.pointee.caseIndex = timeoutIndex
                    ticket.wakeClaimed()
                }
            }
            defer { if let timer { c.scheduler.timers.remove(timer) } }
            try c.suspend(armed: ticket, .select) { t in
                for selectCase in cases { selectCase.withdraw(t) }
            }
            // Won: withdraw the waiters of the other cases (the winner's was taken by its waker).
            for (i, selectCase) in cases.enumerated() where i != o.pointee.caseIndex { selectCase.withdraw(ticket) }
            return o.pointee.caseIndex
        }
        if winner == timeoutIndex { return try timeoutBody!() }
        precondition(cases.indices.contains(winner), "internal inconsistency: select woken without a winning case")
        return try cases[winner].finishWoken(closed: outcome.closed)
    }

    /// The distinct channel locks of the cases, in address order (Go's `sellock`), so that two
    /// selects over the same channels never deadlock.
    private func lockOrder() -> [ChannelCore] {
        if cases.count == 1 { return [cases[0].core] }
        let sorted = cases.map(\.core).sorted { ObjectIdentifier($0) < ObjectIdentifier($1) }
        var unique: [ChannelCore] = []
        unique.reserveCapacity(sorted.count)
        for core in sorted where unique.last !== core { unique.append(core) }
        return unique
    }

    private func unlock(_ cores: [ChannelCore]) {
        for core in cores.reversed() { core.lock.unlock() }
    }
}

/// One case of a select, type-erased over its channel's element type.
class SelectCase<Outcome> {
    let core: ChannelCore

    init(core: ChannelCore) { self.core = core }

    /// Under the channel's lock: completes the operation now if it can (Go's pass 1).
    func poll() -> Bool { preconditionFailure("abstract") }
    /// Under the channel's lock: publishes a waiter for `ticket` (Go's pass 2).
    func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int) {
        preconditionFailure("abstract")
    }
    /// Takes the lock and removes the waiter published with `ticket`, if still queued.
    func withdraw(_ ticket: WaitTicket) { preconditionFailure("abstract") }
    /// After unlocking, for a case completed by `poll()`: wakes the peer, runs the body.
    func finishPolled() throws -> Outcome { preconditionFailure("abstract") }
    /// After a wake that chose this case.
    func finishWoken(closed: Bool) throws -> Outcome { preconditionFailure("abstract") }
}

final class ReceiveCase<Element, Outcome>: SelectCase<Outcome> {
    let storage: ChannelStorage<Element>
    let body: (Element?) throws -> Outcome
    var polled: Element?
    var peer: WaitTicket?
    /// The slot a sender fills while the select waits (stable memory; allocated on demand).
    var slot: UnsafeMutablePointer<Element?>?

    init(_ storage: ChannelStorage<Element>, _ body: @escaping (Element?) throws -> Outcome) {
        self.storage = storage
        self.body = body
        super.init(core: storage)
    }

    deinit {
        slot?.deinitialize(count: 1)
        slot?.deallocate()
    }

    override func poll() -> Bool {
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

    override func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int) {
        let slot = self.slot ?? {
            let p = UnsafeMutablePointer<Element?>.allocate(capacity: 1)
            p.initialize(to: nil)
            self.slot = p
            return p
        }()
        storage.state.receivers.append(ChannelWaiter(ticket: ticket, element: UnsafeMutableRawPointer(slot),
                                                     outcome: outcome, caseIndex: index))
    }

    override func withdraw(_ ticket: WaitTicket) { storage.withdrawReceiver(ticket) }

    override func finishPolled() throws -> Outcome {
        peer?.wakeClaimed()
        return try body(polled)
    }

    override func finishWoken(closed: Bool) throws -> Outcome {
        let value = slot?.pointee
        slot?.pointee = nil
        precondition(closed || value != nil, "internal inconsistency: a select receive was woken without a value")
        return try body(value)
    }
}

final class SendCase<Element, Outcome>: SelectCase<Outcome> {
    let storage: ChannelStorage<Element>
    let body: () throws -> Outcome
    let value: Element
    var closedAtPoll = false
    var peer: WaitTicket?
    /// The value a receiver copies while the select waits (stable memory; allocated on demand).
    var published: UnsafeMutablePointer<Element>?

    init(_ value: Element, _ storage: ChannelStorage<Element>, _ body: @escaping () throws -> Outcome) {
        self.value = value
        self.storage = storage
        self.body = body
        super.init(core: storage)
    }

    deinit {
        published?.deinitialize(count: 1)
        published?.deallocate()
    }

    override func poll() -> Bool {
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

    override func enqueue(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>, index: Int) {
        let p = published ?? {
            let p = UnsafeMutablePointer<Element>.allocate(capacity: 1)
            p.initialize(to: value)
            published = p
            return p
        }()
        storage.state.senders.append(ChannelWaiter(ticket: ticket, element: UnsafeMutableRawPointer(p),
                                                   outcome: outcome, caseIndex: index))
    }

    override func withdraw(_ ticket: WaitTicket) { storage.withdrawSender(ticket) }

    override func finishPolled() throws -> Outcome {
        if closedAtPoll { throw ChannelError.closed }
        peer?.wakeClaimed()
        return try body()
    }

    override func finishWoken(closed: Bool) throws -> Outcome {
        if closed { throw ChannelError.closed }
        return try body()
    }
}
