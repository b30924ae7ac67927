import Synchronization

// The incoming queue of a scheduler: coroutines woken and launched, and jobs posted, from other
// threads, on their way to the scheduler's own thread.
//
// Algorithm. A Treiber stack (R. K. Treiber, "Systems Programming: Coping with Parallelism",
// IBM RJ 5118, 1986) whose consumer takes the whole stack at once and reverses it, the scheme of
// the Linux kernel's lock-less list (`llist_add` by producers, `llist_del_all` then
// `llist_reverse_order` by the consumer). It is intrusive: the link is a word inside the queued
// object (``Coroutine/wakeUpLink``, ``IncomingJob/link``), so waking a coroutine allocates
// nothing. Written from the description of the algorithm, not from either source.
//
// Why not Vyukov's intrusive MPSC node queue (one exchange per push, wait-free producers): its
// consumer needs a stub node of the queued type (a whole `Coroutine`), and a producer preempted
// between its exchange and its link store hides everything pushed after it from the consumer
// (1024cores calls it the "window of inconsistency"). Here the queue is one word: a push is
// visible, whole, at the instant its compare-and-swap succeeds, and closing the queue is one
// exchange of that word, which is what makes the race between a push and `close` simple (below).
// Go (runtime `injectglist`) and Tokio (the `inject` queue) take a lock for the same hand-off.
//
// The head word. 0: empty. `closedMark` (2): closed for good; nothing is accepted any more.
// Otherwise the entry pushed last, whose link names the one pushed before it, and so on down
// to a link of 0: newest first. An entry is a `Coroutine`'s address (objects are 16-byte aligned,
// so its low bits are 0) or an `IncomingJob`'s address with bit 0 set (`jobTag`).
//
// Invariants.
// 1. A coroutine is in at most one queue, at most once. It is pushed only (a) by `makeReady`
//    after its suspension was claimed, exactly once, by whoever wakes it (the compare-and-swap
//    on `Coroutine.epoch`), or (b) once, by the launch that registered it. Until the consumer
//    takes it off and the scheduler runs it, nobody can claim it again. So its link is free to
//    reuse: `wakeUpLink` is `notQueued` whenever the coroutine is in no incoming queue (checked
//    by an assertion in debug builds).
// 2. A queued coroutine is kept alive by its scheduler's registry (it is registered before it
//    is pushed and is unregistered only by its own thread, after it was taken off the queue):
//    the queue holds no reference to it. A queued job holds one reference, taken at the push
//    and given back by whoever takes it off.
// 3. Links are written by the pushing thread before its compare-and-swap publishes the entry
//    (sequentially consistent, so release) and read by the taking thread after its exchange
//    (sequentially consistent, so acquire). The compare-and-swaps on the head form one release
//    sequence, so the taker sees the links and the state of every entry it took — the coroutine's
//    `wakeReason`, a job's closure. ThreadSanitizer sees the same edges: they are
//    `Synchronization.Atomic` operations.
// 4. Order: entries are taken in the order of the successful compare-and-swaps (the reversal
//    restores it), so the pushes of one thread come out in the order that thread made them, and
//    pushes ordered by happens-before (one thread's push causes another's) keep that order.
// 5. Once closed the head stays `closedMark` for the life of the scheduler.
//
// Who may call what.
// - `push`: any thread (lock-free: a failed compare-and-swap means another push or the close
//   succeeded; no allocation).
// - `takeAll`, `close`: the thread that drives the scheduler (the consumer), never two at once.
//   `close` is called by that thread once its loop has ended, after its last `takeAll`.
// - `hasEntries`, `isClosed`: any thread (a snapshot).
//
// The race between a push and close. Both are single atomic operations on the head word, so
// one of them comes first. The push first: its entry is in what `close` took, and `close`
// hands it back to the scheduler, which runs the job or finishes the coroutine as stopped. The
// close first: the push's compare-and-swap fails (the head changed), it reloads the head, finds
// `closedMark` and refuses: `post` returns false and the caller does what it does for a stopped
// scheduler. Nothing is lost and nothing is taken twice: an entry is in the list `close`
// exchanged out, or its push never succeeded.
//
// Wake-ups of a parked loop. Only a push onto an empty queue reports `.acceptedIntoEmpty`, and
// only its pusher needs to look at whether the scheduler is parked (P in its `lifecycle`,
// SchedulerLifecycle.swift): a push onto a non-empty queue comes after one into an empty queue
// that the consumer has not taken yet, whose pusher looks at P after its own push. With the
// consumer's side (it sets P, then looks at the head, both sequentially consistent) one of the
// two sees the other: the consumer sees the entries and does not park, or the pusher sees P and
// wakes the poller (once: `wakeLoop` clears P with one read-modify-write, and only the thread that
// found it set wakes the poller).

/// The intrusive multi-producer, single-consumer queue of a scheduler's incoming work (see the
/// comment at the top of this file for the algorithm, its invariants and who may call what).
struct WakeUpQueue: ~Copyable {
    /// An entry: a coroutine (no reference held) or a job node (one reference held).
    enum Entry {
        case coroutine(Unmanaged<Coroutine>)
        case job(Unmanaged<IncomingJob>)
    }

    /// What a push did.
    enum PushOutcome {
        /// The queue was closed: the entry was not taken.
        case refused
        /// The queue was empty: the pusher must wake the loop if it is parked.
        case acceptedIntoEmpty
        /// Queued behind entries the consumer has not taken yet (whose first pusher wakes it).
        case accepted
    }

    /// The head word: 0, `closedMark`, or the newest entry's bits.
    private let head = Atomic<UInt>(0)

    /// The head of a closed queue (no object lives at address 2).
    static let closedMark: UInt = 2
    /// Bit 0 set: the entry is an ``IncomingJob``.
    static let jobTag: UInt = 1
    /// The link of a coroutine that is in no queue (odd, unlike any coroutine's address, and
    /// unlike 0, the link of the oldest entry).
    static let notQueued: UInt = 3

    init() {}

    /// Queues `entry`, unless the queue is closed. Any thread; lock-free; allocates nothing.
    func push(_ entry: Entry) -> PushOutcome {
        let bits = Self.bits(of: entry)
        var old = head.load(ordering: .relaxed)
        while true {
            if old == Self.closedMark { return .refused }
            Self.setLink(of: bits, to: old)
            let (exchanged, current) = head.compareExchange(expected: old, desired: bits,
                                                            successOrdering: .sequentiallyConsistent,
                                                            failureOrdering: .relaxed)
            if exchanged { return old == 0 ? .acceptedIntoEmpty : .accepted }
            old = current
        }
    }

    /// Whether entries are waiting (a relaxed snapshot: the spin and the quick checks). Any thread.
    var hasEntries: Bool { Self.holdsEntries(head.load(ordering: .relaxed)) }

    /// ``hasEntries``, sequentially consistent: the consumer's check after it announced that it
    /// parks (see "Wake-ups of a parked loop" above). Any thread.
    var hasEntriesOrdered: Bool { Self.holdsEntries(head.load(ordering: .sequentiallyConsistent)) }

    private static func holdsEntries(_ h: UInt) -> Bool { h != 0 && h != closedMark }

    /// Whether ``close(_:)`` has run. Any thread.
    var isClosed: Bool { head.load(ordering: .acquiring) == Self.closedMark }

    /// Takes every entry off and hands them to `body` oldest first. The consumer only.
    /// - Complexity: O(n) for n entries (one exchange, one reversal).
    func takeAll(_ body: (Entry) -> Void) {
        let h = head.load(ordering: .relaxed)
        guard h != 0 && h != Self.closedMark else { return }
        Self.deliver(head.exchange(0, ordering: .sequentiallyConsistent), body)
    }

    /// Closes the queue for good and hands what it held to `body`, oldest first. Later pushes
    /// are refused. The consumer only, once its loop has ended.
    func close(_ body: (Entry) -> Void) {
        let h = head.exchange(Self.closedMark, ordering: .sequentiallyConsistent)
        if h != Self.closedMark { Self.deliver(h, body) }
    }

    /// Reverses the newest-first list starting at `newest` and hands each entry to `body`.
    private static func deliver(_ newest: UInt, _ body: (Entry) -> Void) {
        var reversed: UInt = 0
        var next = newest
        while next != 0 {
            let current = next
            next = link(of: current)
            setLink(of: current, to: reversed)
            reversed = current
        }
        while reversed != 0 {
            let current = reversed
            reversed = link(of: current)
            if current & jobTag == 0 { setLink(of: current, to: notQueued) }
            body(entry(of: current))
        }
    }

    // MARK: Encoding

    private static func bits(of entry: Entry) -> UInt {
        switch entry {
        case .coroutine(let c):
            let bits = UInt(bitPattern: c.toOpaque())
            assert(c._withUnsafeGuaranteedRef { $0.wakeUpLink } == notQueued,
                   "internal inconsistency: a coroutine was queued twice")
            return bits
        case .job(let j):
            return UInt(bitPattern: j.toOpaque()) | jobTag
        }
    }

    private static func entry(of bits: UInt) -> Entry {
        if bits & jobTag == 0 {
            .coroutine(Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped))
        } else {
            .job(Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits & ~jobTag).unsafelyUnwrapped))
        }
    }

    private static func link(of bits: UInt) -> UInt {
        if bits & jobTag == 0 {
            Unmanaged<Coroutine>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { $0.wakeUpLink }
        } else {
            Unmanaged<IncomingJob>.fromOpaque(UnsafeRawPointer(bitPattern: bits & ~jobTag).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { $0.link }
        }
    }

    private static func setLink(of bits: UInt, to value: UInt) {
        if bits & jobTag == 0 {
            Unmanaged<Coroutine>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { $0.wakeUpLink = value }
        } else {
            Unmanaged<IncomingJob>.fromOpaque(UnsafeRawPointer(bitPattern: bits & ~jobTag).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { $0.link = value }
        }
    }
}

/// A job posted to a scheduler from another thread, as an entry of its ``WakeUpQueue`` (one
/// allocation per job; waking a coroutine needs none).
final class IncomingJob {
    /// The queue's link (see ``WakeUpQueue``). Written by the pusher before it publishes the
    /// node, read by the consumer after it took it.
    var link: UInt = 0
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}
