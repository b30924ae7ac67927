import Synchronization

/// A pool scheduler's queue of unstarted pool launches: its owner pushes and pops without a
/// lock, and an idle peer takes about half of it with one compare-and-swap.
///
/// The algorithm is Go's per-P run queue (`runtime/proc.go`: `runqput`, `runqget`, `runqgrab`,
/// `runqsteal`), holding ``PoolLaunch``es instead of goroutines; it is described in
/// <doc:PoolsAndStealing>.
///
/// ## Invariants
/// - `head` and `tail` count pushes and takes since creation (wrapping `UInt32`); the entries
///   are the slots `head..<tail`, modulo ``capacity``, and `0 ≤ tail − head ≤ capacity`.
/// - Only the owner writes `tail` and writes slots, and only slots outside `head..<tail` (it
///   checks `tail − head < capacity` against a `head` it loaded, which can only have grown since).
/// - Everybody advances `head`, only by compare-and-swap from the value whose slots it read:
///   whoever's swap succeeds owns those entries (their references move to it); a reader whose
///   swap fails read nothing it may use, and drops what it copied without releasing anything.
/// - A slot's words are written before `tail` is published (release) and read after `tail` was
///   loaded (acquire); every read of a slot happens before the swap that frees it (release), and
///   the owner loads `head` (acquire) before it reuses a slot: a slot is never read while being
///   overwritten by a reader whose swap then succeeds.
///
/// ## Who calls what
/// - The owner's thread: ``push(_:overflow:)``, ``pop()``, ``steal(from:)`` (into its own queue,
///   only when it is empty), ``drain()``.
/// - Any thread: ``count`` (a snapshot).
final class LaunchQueue: @unchecked Sendable {
    /// Slots per queue (as Go's `runq`): a full queue moves half of itself to the pool's shared
    /// queue in one step.
    static let capacity: UInt32 = 256

    /// Six words: one ``PoolLaunch``, stored with relaxed atomic accesses so that a thief's read
    /// racing with the owner's reuse of the slot is a defined (and then discarded) read.
    struct Slot: ~Copyable {
        let w0 = Atomic<UInt>(0), w1 = Atomic<UInt>(0), w2 = Atomic<UInt>(0)
        let w3 = Atomic<UInt>(0), w4 = Atomic<UInt>(0), w5 = Atomic<UInt>(0)

        func load() -> Words {
            (w0.load(ordering: .relaxed), w1.load(ordering: .relaxed), w2.load(ordering: .relaxed),
             w3.load(ordering: .relaxed), w4.load(ordering: .relaxed), w5.load(ordering: .relaxed))
        }

        func store(_ w: Words) {
            w0.store(w.0, ordering: .relaxed); w1.store(w.1, ordering: .relaxed); w2.store(w.2, ordering: .relaxed)
            w3.store(w.3, ordering: .relaxed); w4.store(w.4, ordering: .relaxed); w5.store(w.5, ordering: .relaxed)
        }
    }
    typealias Words = (UInt, UInt, UInt, UInt, UInt, UInt)

    /// Taken by compare-and-swap, by the owner and by thieves.
    private let head = Atomic<UInt32>(0)
    /// Written by the owner only.
    private let tail = Atomic<UInt32>(0)
    private let slots: UnsafeMutablePointer<Slot>

    init() {
        precondition(MemoryLayout<PoolLaunch>.size == MemoryLayout<Words>.size
                        && PoolLaunch.wordCount == 6,
                     "internal inconsistency: a PoolLaunch does not fill a LaunchQueue slot")
        slots = .allocate(capacity: Int(Self.capacity))
        for i in 0..<Int(Self.capacity) { (slots + i).initialize(to: Slot()) }
    }

    deinit {
        // The owner drained it when its scheduler closed (pool schedulers of default pools
        // never close, and never deinitialise).
        slots.deinitialize(count: Int(Self.capacity))
        slots.deallocate()
    }

    /// How many launches it holds: a snapshot, exact only on the owner's thread between its own
    /// operations. Any thread.
    var count: Int {
        while true {
            let h = head.load(ordering: .acquiring)
            let t = tail.load(ordering: .acquiring)
            // `head` may pass a `tail` loaded before it: then load both again.
            if t &- h <= Self.capacity { return Int(t &- h) }
        }
    }

    /// Whether it holds nothing (a snapshot). Any thread.
    var isEmpty: Bool { count == 0 }

    /// Appends `launch`. If the queue is full, hands its older half and `launch` to
    /// `overflow` (for the pool's shared queue, which then owns them), oldest first (Go's
    /// `runqputslow`). Owner only.
    /// - Complexity: O(1); O(``capacity``) when full, once per ``capacity``/2 pushes.
    @inline(__always)
    func push(_ launch: consuming PoolLaunch, overflow: (UnsafeBufferPointer<Words>) -> Void) {
        push(words: Self.words(moving: launch), overflow: overflow)
    }

    /// ``push(_:overflow:)`` for a launch already in words.
    @inline(__always)
    func push(words: Words, overflow: (UnsafeBufferPointer<Words>) -> Void) {
        while true {
            let h = head.load(ordering: .acquiring)
            let t = tail.load(ordering: .relaxed)
            if t &- h < Self.capacity {
                slots[Int(t % Self.capacity)].store(words)
                tail.store(t &+ 1, ordering: .releasing)
                return
            }
            if pushSlow(words, head: h, tail: t, overflow: overflow) { return }
            // A thief took some meanwhile: there is room now.
        }
    }

    /// Takes the older half of a full queue and hands it, with `words`, to `overflow`; false
    /// (nothing taken) if a thief moved `head` first.
    private func pushSlow(_ words: Words, head h: UInt32, tail t: UInt32,
                          overflow: (UnsafeBufferPointer<Words>) -> Void) -> Bool {
        let n = Int((t &- h) / 2)
        return withUnsafeTemporaryAllocation(of: Words.self, capacity: n + 1) { batch in
            for i in 0..<n { batch[i] = slots[Int((h &+ UInt32(i)) % Self.capacity)].load() }
            guard head.compareExchange(expected: h, desired: h &+ UInt32(n), ordering: .acquiringAndReleasing).exchanged else {
                return false   // nothing read is ours: dropped as plain words
            }
            batch[n] = words
            overflow(UnsafeBufferPointer(batch))
            return true
        }
    }

    /// Takes the oldest launch off. Owner only (thieves take with ``steal(from:)``).
    /// - Complexity: O(1).
    @inline(__always)
    func pop() -> PoolLaunch? {
        while true {
            let h = head.load(ordering: .acquiring)
            let t = tail.load(ordering: .relaxed)
            if t == h { return nil }
            let words = slots[Int(h % Self.capacity)].load()
            if head.compareExchange(expected: h, desired: h &+ 1, ordering: .acquiringAndReleasing).exchanged {
                return Self.launch(moving: words)
            }
        }
    }

    /// Takes about half of `victim`'s launches (rounded up): returns the oldest and appends the
    /// rest to this queue, in order, which must be empty (Go's `runqsteal`, except that Go runs
    /// the newest it took first). Called by this queue's owner.
    /// - Returns: nil if `victim` was empty.
    /// - Complexity: O(n) for the n launches taken.
    func steal(from victim: LaunchQueue) -> PoolLaunch? {
        let t = tail.load(ordering: .relaxed)
        while true {
            let h = victim.head.load(ordering: .acquiring)
            let vt = victim.tail.load(ordering: .acquiring)
            let available = vt &- h
            // A `head` loaded before a `tail` that other takes moved past: load both again.
            if available > Self.capacity { continue }
            let n = available - available / 2
            if n == 0 { return nil }
            // The oldest is returned; the others are copied into this queue's free slots, which
            // nobody reads until `tail` moves.
            let first = victim.slots[Int(h % Self.capacity)].load()
            for i in 1..<n {
                slots[Int((t &+ i &- 1) % Self.capacity)].store(victim.slots[Int((h &+ i) % Self.capacity)].load())
            }
            guard victim.head.compareExchange(expected: h, desired: h &+ n, ordering: .acquiringAndReleasing).exchanged else {
                continue   // the copies are not ours: overwritten next time
            }
            if n > 1 { tail.store(t &+ n &- 1, ordering: .releasing) }
            return Self.launch(moving: first)
        }
    }

    /// Takes every launch off, oldest first. Owner only.
    func drain() -> [PoolLaunch] {
        var all: [PoolLaunch] = []
        while let l = pop() { all.append(l) }
        return all
    }

    /// The words of `launch`, which they now own.
    @inline(__always)
    static func words(moving launch: consuming PoolLaunch) -> Words {
        var source: PoolLaunch? = consume launch
        return withUnsafeTemporaryAllocation(of: PoolLaunch.self, capacity: 1) { b in
            b.baseAddress.unsafelyUnwrapped.initialize(to: source.take().unsafelyUnwrapped)
            // Not deinitialised: its references now belong to the words.
            return UnsafeRawPointer(b.baseAddress.unsafelyUnwrapped).load(as: Words.self)
        }
    }

    /// The launch whose words (and references) `words` are.
    @inline(__always)
    static func launch(moving words: Words) -> PoolLaunch {
        withUnsafeTemporaryAllocation(of: PoolLaunch.self, capacity: 1) { b in
            UnsafeMutableRawPointer(b.baseAddress.unsafelyUnwrapped).storeBytes(of: words, as: Words.self)
            return b.baseAddress.unsafelyUnwrapped.move()
        }
    }
}
