import CCoroutines

/// Waits on several channel operations and runs exactly one of them (Go's `select`).
///
/// ```swift
/// let text = try select { s in
///     s.receive(from: numbers) { n in "number \(n ?? -1)" }
///     s.send("ping", to: pings) { "sent ping" }
///     s.timeout(after: .seconds(1)) { "nothing for a second" }
/// }
/// ```
///
/// Among the cases that are ready, one is chosen uniformly at random. A receive case on a
/// closed, drained channel is ready and gets nil; a send case on a closed channel is ready and
/// makes `select` throw ``ChannelError/closed``. With ``Select/otherwise(_:)`` the select never
/// suspends: `otherwise` runs if no case is ready at the instant of the call. With no cases at
/// all, `select` suspends until the coroutine is cancelled (Go's `select {}`). A select's own
/// send case never pairs with its own receive case. The case bodies run after the channel
/// operation, outside every lock.
///
/// - Parameter build: Adds the cases to the ``Select`` it is given.
/// - Returns: The value of the body of the case that ran.
/// - Throws: What the chosen body throws; ``ChannelError/closed`` for a send case on a closed
///   channel; `CancellationError` if the coroutine is cancelled (checked first);
///   `CoroutineError.timedOut` inside an expiring `withTimeout`;
///   `CoroutineError.notInCoroutine` outside a coroutine.
/// - Suspends: while no case is ready (unless there is an `otherwise`); resumes on the
///   coroutine's own scheduler.
/// - Complexity: O(cases · log cases) to lock the channels in address order, plus O(waiters)
///   per channel to withdraw the losing cases after a wait.
///
/// The algorithm is Go's (runtime `select.go`, `selectgo`): lock every channel in address
/// order, poll the cases in a random order, and if none is ready publish a waiter on every
/// channel with one shared claim, so that exactly one case can win.
@inlinable
public func select<Outcome>(_ build: (inout Select<Outcome>) throws -> Void) throws -> Outcome {
    let c = try Coroutine.requireCurrent()
    var s = Select<Outcome>()
    try build(&s)
    return try s.run(in: c)
}

/// The cases of one ``select(_:)``, added by its `build` closure.
///
/// Not copyable: it exists only for the duration of the `select` call.
public struct Select<Outcome>: ~Copyable {
    @usableFromInline var cases: [SelectCase<Outcome>] = []
    @usableFromInline var otherwiseBody: (() throws -> Outcome)?
    @usableFromInline var timeoutDeadline = UInt64.max
    @usableFromInline var timeoutBody: (() throws -> Outcome)?

    @inlinable init() {
        cases.reserveCapacity(4)   // one allocation for the usual handful of cases
    }

    /// Adds a case that receives from `channel`.
    ///
    /// - Parameters:
    ///   - channel: The channel to receive from. It may appear in several cases.
    ///   - body: Runs with the received value, or nil if the channel is closed and drained.
    /// - Complexity: O(1).
    @inlinable
    public mutating func receive<Element>(from channel: Channel<Element>,
                                          _ body: @escaping (Element?) throws -> Outcome) {
        cases.append(ReceiveCase(channel.storage, body))
    }

    /// Adds a case that sends `value` to `channel`.
    ///
    /// If the channel is (or becomes, while the select waits) closed, this case is ready and the
    /// select throws ``ChannelError/closed``; the value is not delivered.
    /// - Parameters:
    ///   - value: The value to send if this case is chosen.
    ///   - channel: The channel to send to.
    ///   - body: Runs after the value was taken or buffered.
    /// - Complexity: O(1).
    @inlinable
    public mutating func send<Element>(_ value: Element, to channel: Channel<Element>,
                                       _ body: @escaping () throws -> Outcome) {
        cases.append(SendCase(value, channel.storage, body))
    }

    /// Adds a case that is chosen if nothing else is ready after `duration`.
    ///
    /// A duration ≤ 0 is ready at once (and takes part in the random choice among ready cases).
    /// With several timeouts, the earliest wins. The timer is released when another case wins.
    /// - Complexity: O(1); the wait arms one timer (O(log n) in the scheduler's timers).
    @inlinable
    public mutating func timeout(after duration: Duration, _ body: @escaping () throws -> Outcome) {
        let deadline = deadlineNanoseconds(after: duration)
        if timeoutBody == nil || deadline < timeoutDeadline {
            timeoutDeadline = deadline
            timeoutBody = body
        }
    }

    /// Adds the non-blocking alternative: runs if no case is ready at the instant of the call.
    ///
    /// A second `otherwise` in one select is a precondition failure.
    @inlinable
    public mutating func otherwise(_ body: @escaping () throws -> Outcome) {
        precondition(otherwiseBody == nil, "select: a second `otherwise` case; a select takes at most one")
        otherwiseBody = body
    }
}
