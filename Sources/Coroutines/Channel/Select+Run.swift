import CCoroutines

extension Select {
    /// Runs the select for coroutine `c` (Go runtime `selectgo`). The cases stay owned by
    /// `self` (``destroyCases()`` destroys them afterwards); the chosen case's body runs here.
    @inlinable
    mutating func run(in c: Coroutine) throws -> Outcome {
        try c.checkInterrupts()
        let n = count
        // The lock order (up to n distinct channel locks) and the poll order (n cases and the
        // timeout): in the stack buffer while the case records are, else on the heap.
        if casesOnHeap {
            let scratch = UnsafeMutableRawPointer.allocate(byteCount: (2 * n + 1) * MemoryLayout<Int>.stride,
                                                           alignment: MemoryLayout<Int>.alignment)
            defer { scratch.deallocate() }
            return try run(in: c, scratch: scratch)
        }
        return try run(in: c, scratch: scratch)
    }

    /// ``run(in:)`` with `scratch` memory for 2n + 1 words.
    @inlinable @inline(__always)
    func run(in c: Coroutine, scratch: UnsafeMutableRawPointer) throws -> Outcome {
        let cases = self.cases
        let n = count
        let otherwiseBody = self.otherwiseBody
        let timeoutBody = self.timeoutBody
        let timeoutDeadline = self.timeoutDeadline
        let timeoutReady = timeoutBody != nil && timeoutDeadline <= ccoro_now_ns()
        let locks = UnsafeMutableBufferPointer(start: scratch.bindMemory(to: UnsafePointer<FutexLock>.self, capacity: n),
                                               count: n)
        let order = UnsafeMutableBufferPointer(start: (scratch + n * MemoryLayout<Int>.stride).bindMemory(to: Int.self, capacity: n + 1),
                                               count: n + 1)
        let lockCount = selectLockOrder(cases, n, locks)
        for k in 0..<lockCount { locks[k].pointee.lock() }

        // Pass 1: poll in a random order, so that a ready case is chosen uniformly.
        var polled = SelectCase.Polled()
        let ready: Int = withUnsafeMutablePointer(to: &polled) { polled in
            let total = n + (timeoutReady ? 1 : 0)
            // Borrowed: `c.scheduler` would retain and release it (a computed property).
            c.placement._withUnsafeGuaranteedRef { $0.randomPermutation(order, count: total) }
            for k in 0..<total {
                let i = order[k]
                if i == n || (cases + i).performNonThrowing(.poll, UnsafeMutableRawPointer(polled)) { return i }
            }
            return -1
        }
        if ready >= 0 {
            selectUnlock(locks, lockCount)
            if ready == n { return try timeoutBody.unsafelyUnwrapped.pointee() }
            if polled.closed { return try selectFinish(cases + ready, closed: true) }
            polled.peer.take()?.wake()
            return try selectFinish(cases + ready, closed: false)
        }
        if let otherwiseBody {
            selectUnlock(locks, lockCount)
            return try otherwiseBody.pointee()
        }

        // Pass 2: publish one waiter record per case, all for the same armed epoch (so exactly
        // one can be claimed), and suspend.
        var outcome = WaitOutcome()
        let epoch = c.armEpoch()
        let winner: Int = try withUnsafeMutablePointer(to: &outcome) { o in
            // The records are on this stack: each stays linked in its channel's queue until a
            // waker pops it or the loops below withdraw it, always before this frame ends.
            try withUnsafeTemporaryAllocation(of: ChannelWaiter.self, capacity: n) { buffer in
                let records = buffer.baseAddress.unsafelyUnwrapped
                for i in 0..<n {
                    (records + i).initialize(to: ChannelWaiter(coroutine: Unmanaged.passUnretained(c), epoch: epoch,
                                                               element: cases[i].element, outcome: o, caseIndex: i))
                    _ = (cases + i).performNonThrowing(.enqueue, UnsafeMutableRawPointer(records + i))
                }
                defer { records.deinitialize(count: n) }
                selectUnlock(locks, lockCount)
                let timer = timeoutBody == nil ? nil
                    : c.placement._withUnsafeGuaranteedRef {
                        $0.scheduleSelectTimeout(deadline: timeoutDeadline, WaitTicket(coroutine: c, epoch: epoch), o, index: n)
                    }
                defer { if let timer { c.placement._withUnsafeGuaranteedRef { $0.cancelSelectTimeout(timer) } } }
                // A send case's published value stays in its block until the select's cases are
                // destroyed, after every waiter was withdrawn (or taken by the waker, which copied
                // the value under the channel's lock before waking this coroutine).
                try c.suspend(armedEpoch: epoch, .select) { _ in
                    for i in 0..<n { (cases + i).withdraw(records + i) }
                }
                // Won: withdraw the other cases' waiters (the winner's was popped by its waker;
                // withdrawing a popped record does nothing).
                let winner = o.pointee.caseIndex
                for i in 0..<n where i != winner { (cases + i).withdraw(records + i) }
                return winner
            }
        }
        if winner == n { return try timeoutBody.unsafelyUnwrapped.pointee() }
        precondition(winner >= 0 && winner < n, "internal inconsistency: select woken without a winning case")
        return try selectFinish(cases + winner, closed: outcome.closed)
    }
}

/// Runs the body of the chosen case (after unlocking): `finish`, or `finishClosed` if its
/// channel was closed.
@inlinable @inline(__always)
func selectFinish<Outcome>(_ chosen: UnsafeMutablePointer<SelectCase>, closed: Bool) throws -> Outcome {
    try withUnsafeTemporaryAllocation(of: Outcome.self, capacity: 1) { result in
        let result = result.baseAddress.unsafelyUnwrapped
        _ = try chosen.perform(closed ? .finishClosed : .finish, UnsafeMutableRawPointer(result))
        return result.move()
    }
}

/// Writes the distinct channel locks of the `n` cases into `locks` in address order (Go's
/// `sellock`), so that two selects over the same channels never deadlock; a channel used by
/// several cases is locked once. Returns their number.
@inlinable @inline(__always)
func selectLockOrder(_ cases: UnsafeMutablePointer<SelectCase>, _ n: Int,
                     _ locks: UnsafeMutableBufferPointer<UnsafePointer<FutexLock>>) -> Int {
    if n <= 2 {
        // The usual select: no loop.
        if n == 0 { return 0 }
        let a = cases[0].lock
        if n == 1 { locks[0] = a; return 1 }
        let b = cases[1].lock
        if a == b { locks[0] = a; return 1 }
        locks[0] = Swift.min(a, b)
        locks[1] = Swift.max(a, b)
        return 2
    }
    var count = 0
    for i in 0..<n {
        let p = cases[i].lock
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

/// Releases the first `count` locks of `locks`, in the reverse order.
@inlinable
func selectUnlock(_ locks: UnsafeMutableBufferPointer<UnsafePointer<FutexLock>>, _ count: Int) {
    var k = count
    while k > 0 {
        k -= 1
        locks[k].pointee.unlock()
    }
}
