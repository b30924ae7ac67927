extension Coroutine {
    /// Suspends the calling coroutine until this coroutine has finished.
    ///
    /// Any number of coroutines may join; all are woken. Returns normally whatever the body threw
    /// (read ``error``).
    ///
    /// - Throws: `CoroutineError.notInCoroutine` outside a coroutine; `CoroutineError.joinSelf`
    ///   when joining itself; `CancellationError` if the caller is (or becomes) cancelled.
    /// - Suspends: yes, unless already finished; resumes on the caller's own scheduler.
    /// - Complexity: O(1) to register and to cancel a join (amortised).
    public func join() throws {
        try Coroutine.withCurrent { me in
            if me === self { throw CoroutineError.joinSelf }
            try me.wait(.join, register: { ticket in
                withShared { s in
                    if s.finished { return true }
                    s.joiners.append(ticket)
                    return false
                }
            }, unregister: { ticket in
                withShared { s in
                    s.joiners.withdraw(ticket)
                }
            })
        }
    }
}
