extension Coroutine {
    /// Launches a producer coroutine that feeds a new channel, and returns the channel
    /// (Kotlin's `produce`).
    ///
    /// The channel is closed when `body` returns; if `body` throws, it is closed with that error
    /// (receivers get it after draining). If the consumer closes the channel, the producer's
    /// next send throws ``ChannelError/closed`` and the producer ends quietly: no
    /// unobserved-error report. If the producer never runs (cancelled before it started, or its
    /// scheduler stopped), the channel is closed with that error.
    ///
    /// ```swift
    /// let squares = Coroutine.produce { out in for i in 1...5 { try out.send(i * i) } }
    /// for s in squares { print(s) }
    /// ```
    ///
    /// - Parameters:
    ///   - scheduler: Where the producer runs (as for ``launch(on:name:stackSize:_:)-(CoroutineScheduler?,_,_,_)``).
    ///   - capacity: The channel's capacity.
    ///   - body: The producer; it sends into the channel it is given.
    /// - Returns: The channel the producer feeds.
    /// - Suspends: no (the producer runs later). Thread-safe. Complexity: O(1).
    public static func produce<T: Sendable>(on scheduler: CoroutineScheduler? = nil,
                                            capacity: Channel<T>.Capacity = 0,
                                            _ body: @escaping @Sendable (Channel<T>) throws -> Void) -> Channel<T> {
        let (target, pool) = CoroutineScheduler.placement(for: scheduler)
        return produce(on: target, pool: pool, capacity: capacity, body)
    }

    /// Launches a producer coroutine onto a scheduler of `pool` (a pool launch, as
    /// ``launch(on:name:stackSize:_:)-(SchedulerPool,_,_,_)``) that feeds a new channel, and
    /// returns the channel; otherwise as
    /// ``produce(on:capacity:_:)-(CoroutineScheduler?,_,_)``.
    ///
    /// - Parameters:
    ///   - pool: The pool whose schedulers may run the producer.
    ///   - capacity: The channel's capacity.
    ///   - body: The producer; it sends into the channel it is given.
    /// - Returns: The channel the producer feeds.
    /// - Suspends: no (the producer runs later). Thread-safe. Complexity: O(1) amortised.
    public static func produce<T: Sendable>(on pool: SchedulerPool,
                                            capacity: Channel<T>.Capacity = 0,
                                            _ body: @escaping @Sendable (Channel<T>) throws -> Void) -> Channel<T> {
        produce(on: pool.firstPlacement(), pool: pool, capacity: capacity, body)
    }

    private static func produce<T: Sendable>(on scheduler: CoroutineScheduler, pool: SchedulerPool?,
                                             capacity: Channel<T>.Capacity,
                                             _ body: @escaping @Sendable (Channel<T>) throws -> Void) -> Channel<T> {
        let channel = Channel<T>(capacity: capacity)
        let producer = Coroutine(scheduler: scheduler, pool: pool, name: "produce",
                                 stackSize: nil, reportsUnobservedErrors: false,
                                 unstartedObserver: channel,
                                 body: {
                                     do {
                                         try body(channel)
                                         channel.close()
                                     } catch {
                                         // Already closed by the consumer: the producer just ends.
                                         channel.close(throwing: error)
                                     }
                                 })
        producer.startUnderCurrent()
        return channel
    }
}

/// A producer that never ran closes its channel with the reason.
extension Channel: UnstartedObserver {
    @usableFromInline
    func coroutineNeverRan(_ error: any Error) { close(throwing: error) }
}
