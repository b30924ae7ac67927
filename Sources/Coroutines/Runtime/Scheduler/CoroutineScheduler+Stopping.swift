import Synchronization

/// Stopping a scheduler: the request (any thread), the cancellation of its coroutines, and the
/// closing of a dedicated or temporary scheduler once its loop has ended.
extension CoroutineScheduler {
    /// Cancels and unwinds the scheduler's coroutines, then ends its thread (for ``main``: makes
    /// ``run()`` return once its coroutines have finished).
    ///
    /// A later launch onto a stopped dedicated scheduler never runs and finishes with
    /// `CoroutineError.schedulerStopped`. A scheduler of a ``SchedulerPool`` is not stopped alone:
    /// the call is ignored (``SchedulerPool/stop()`` stops a pool created by the user). On ``main`` it ends the current ``run()`` (or `runBlocking` on the
    /// main thread) — coroutines launched onto main until then are cancelled too — and is
    /// ignored while nothing drives main.
    ///
    /// In a child made by `fork()` it does nothing: the scheduler's thread does not exist there
    /// (nothing launched in the child runs: ``CoroutineError/forkedProcess``).
    ///
    /// - Suspends: no; returns at once (the unwinding happens on the scheduler's thread).
    ///   Thread-safe and idempotent.
    public func stop() {
        guard kind != .pool, !ForkGuard.isForkedChild else { return }
        requestStop()
    }

    /// ``stop()``, also for a pool scheduler (its pool's ``SchedulerPool/stop()``).
    func requestStop() {
        // main: a stop ends the current run; with nothing driving main there is nothing to end
        // (`requestStop` refuses it, in the same compare-and-swap that would set the request).
        guard lifecycle.apply(.requestStop, kind: kind).new.isStopRequested else { return }
        wakeLoop()
    }

    /// Whether a dedicated (or temporary) scheduler, or a scheduler of a stopped pool, has
    /// stopped for good: it has closed, and no coroutine can run on it. Coroutines that never
    /// started are finished on its thread right after it closes, before the thread ends. Always
    /// false for ``main`` (which can be driven again) and for the schedulers of the default pools
    /// (which never stop).
    public var isStopped: Bool { incoming.isClosed }

    /// Cancels every live coroutine of this scheduler (stop, runBlocking's error path).
    func cancelAll() {
        // Pending launches have no coroutine yet: they see the count move when created. Off this
        // scheduler's thread (a job of a stopped scheduler, run on a pool scheduler) none is left.
        if isOnOwnThread { cancelAllCount &+= 1 }
        for c in liveCoroutines() { c.cancel() }
    }

    /// Closes the incoming queue after the loop ended; leftovers finish as stopped. On the
    /// thread that drove the scheduler. A post that races with it is either among the leftovers
    /// or refused (see ``WakeUpQueue``, "The race between a push and close").
    func close() {
        SchedulerDirectory.shared.remove(self)
        // Closed in the lifecycle first, so that whoever sees the incoming queue closed sees it
        // there too (`SchedulerLifecycle.swift`, "The mirror of the incoming queue").
        lifecycle.apply(.close, kind: kind)
        var leftovers: [Runnable] = []
        incoming.close { entry in
            switch entry {
            case .coroutine(let u): leftovers.append(.coroutine(u.takeUnretainedValue()))
            case .job(let node): leftovers.append(.job(node.takeRetainedValue().run))
            }
        }
        // Pool launches cannot be queued here any more (only this thread queues them, and it
        // runs no coroutine now); whatever is left was launched before the stop.
        for l in launchQueue?.drain() ?? [] { l.finishUnstarted(CancellationError()) }
        for item in leftovers + drainRunQueue() {
            switch item {
            case .job(let job): job()   // observers and timer bookkeeping: run them here, once
            case .coroutine(let c): c.finishUnstarted(CoroutineError.schedulerStopped)
            }
        }
        releaseStackCache()
        // Timers of a stopped scheduler can never fire here.
        handOverTimers()
    }
}
