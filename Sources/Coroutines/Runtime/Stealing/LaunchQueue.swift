import Synchronization

/// A pool scheduler's queue of unstarted pool launches: its owner pushes and pops without a
/// lock, and an idle peer takes about half of it with one compare-and-swap.
///
/// The algorithm is Go's per-P run queue (`runtime/proc.go`: `runqput`, `runqget`, `runqgrab`,
/// `runqsteal`), holding ``PoolLaunch``es instead of goroutines; it is described in
/// <doc:PoolsAndStealing>.
///
/// In front of the ring sits a small last-in first-out stack of launches made on the owner's
/// thread (``lifoCapacity`` slots; Go's `runnext`, Tokio's LIFO slot and kotlinx.coroutines'
/// `lastScheduledTask` are the one-slot versions of it). The owner starts its newest launch
/// first, so a fan-out runs depth first: a parent's children finish before the parent is woken,
/// in the order that makes its first `await` the last to return, and only a few coroutines of
/// the tree are alive at once. A full stack moves its oldest entry to the ring, where peers steal
/// it: the oldest launches are the largest subtrees. Each slot holds one created, unstarted
/// coroutine (+1) and is taken by an atomic exchange, by the owner or by a thief, so a peer can
/// still take launches from a scheduler that is blocked. Measured with skynet on a one-scheduler
/// pool: with the ring alone (first in, first out), every parent was woken once per child, nine
/// suspensions more per parent than on a plain scheduler.
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
/// - A LIFO slot holds 0 or one coroutine's address with its reference; only the owner stores
///   into a slot, and only into one that holds 0 (slots outside its window `lifoTop − lifoCount
///   ..< lifoTop` were emptied by the exchange that took their entry); whoever's exchange
///   returns the address owns the reference. `lifoCount` counts the window's slots, some of
///   which thieves may have emptied: the owner skips those.
///
/// ## Who calls what
/// - The owner's thread: ``push(_:overflow:)``, ``pop()``, ``steal(from:)`` (into its own queue,
///   only when it is empty), ``pushNewest(_:overflow:)``, ``popNewest()``, ``drain()``.
/// - A peer's thread: ``stealNewest(from:)`` (called by the thief's own queue).
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

    /// Slots of the last-in first-out stack in front of the ring.
    static let lifoCapacity = 16
    /// Each 0 or the address of an unstarted coroutine (+1).
    private let lifo: UnsafeMutablePointer<Atomic<UInt>>
    /// Owner only: where the next entry goes (modulo ``lifoCapacity``), and how many slots below
    /// it belong to the stack.
    private var lifoTop = 0
    private var lifoCount = 0
    /// `lifoCount` for other threads: 0 when the stack is empty; else a hint, some of those slots
    /// may have been emptied by thieves (``count`` looks at the slots).
    private let lifoHint = Atomic<Int>(0)

    init() {
        precondition(MemoryLayout<PoolLaunch>.size == MemoryLayout<Words>.size
                        && PoolLaunch.wordCount == 6,
                     "internal inconsistency: a PoolLaunch does not fill a LaunchQueue slot")
        slots = .allocate(capacity: Int(Self.capacity))
        for i in 0..<Int(Self.capacity) { (slots + i).initialize(to: Slot()) }
        lifo = .allocate(capacity: Self.lifoCapacity)
        for i in 0..<Self.lifoCapacity { (lifo + i).initialize(to: Atomic(0)) }
    }

    deinit {
        // The owner drained it when its scheduler closed (pool schedulers of default pools
        // never close, and never deinitialise).
        slots.deinitialize(count: Int(Self.capacity))
        slots.deallocate()
        lifo.deinitialize(count: Self.lifoCapacity)
        lifo.deallocate()
    }

    /// How many launches it holds: a snapshot, exact only on the owner's thread between its own
    /// operations. Any thread.
    var count: Int {
        while true {
            let h = head.load(ordering: .acquiring)
            let t = tail.load(ordering: .acquiring)
            // `head` may pass a `tail` loaded before it: then load both again.
            if t &- h <= Self.capacity { return Int(t &- h) + lifoEntryCount }
        }
    }

    /// How many of the stack's slots hold an entry (a snapshot). Any thread. `lifoHint` alone
    /// would not do: a thief empties slots without changing it, and it stays stale until the
    /// owner pushes or pops again, which a blocked owner never does (idle peers would then keep
    /// looking at its empty stack instead of parking).
    /// - Complexity: O(1) when the owner's stack is empty, else O(``lifoCapacity``).
    private var lifoEntryCount: Int {
        guard lifoHint.load(ordering: .sequentiallyConsistent) > 0 else { return 0 }
        var n = 0
        for i in 0..<Self.lifoCapacity where lifo[i].load(ordering: .acquiring) != 0 { n += 1 }
        return n
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

    /// Takes every launch off: the ring's oldest first, then the stack's newest first. Owner only.
    func drain() -> [PoolLaunch] {
        var all: [PoolLaunch] = []
        while let l = pop() { all.append(l) }
        while let c = popNewest() { all.append(PoolLaunch(coroutine: c)) }
        return all
    }

    // MARK: The last-in first-out stack

    /// Pushes `entry` (an unstarted coroutine, +1, which the stack now owns) onto the stack. If
    /// the stack was full, its oldest entry moves to the ring (``push(_:overflow:)``). Owner only.
    /// - Complexity: O(1).
    @inline(__always)
    func pushNewest(_ entry: Unmanaged<Coroutine>, overflow: (UnsafeBufferPointer<Words>) -> Void) {
        let k = Self.lifoCapacity
        var evicted: UInt = 0
        if lifoCount == k {
            // The oldest entry's slot is the one the new entry goes to.
            evicted = lifo[lifoTop % k].exchange(0, ordering: .acquiring)
            lifoCount -= 1
        }
        lifo[lifoTop % k].store(UInt(bitPattern: entry.toOpaque()), ordering: .releasing)
        lifoTop &+= 1
        lifoCount += 1
        lifoHint.store(lifoCount, ordering: .relaxed)
        if evicted != 0 {
            let c = Unmanaged<Coroutine>.fromOpaque(UnsafeRawPointer(bitPattern: evicted).unsafelyUnwrapped)
            push(PoolLaunch(coroutine: c), overflow: overflow)
        }
    }

    /// Takes the newest entry off the stack (+1, the caller's), skipping slots a thief emptied.
    /// Owner only.
    /// - Complexity: O(1) amortised.
    @inline(__always)
    func popNewest() -> Unmanaged<Coroutine>? {
        while lifoCount > 0 {
            lifoTop &-= 1
            lifoCount -= 1
            let bits = lifo[lifoTop % Self.lifoCapacity].exchange(0, ordering: .acquiring)
            if bits != 0 {
                lifoHint.store(lifoCount, ordering: .relaxed)
                return Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
            }
        }
        lifoHint.store(0, ordering: .relaxed)
        return nil
    }

    /// Takes one entry of `victim`'s stack (+1, the caller's), if it has any. Any thread but the
    /// victim's owner (a thief whose own queue is empty).
    /// - Complexity: O(``lifoCapacity``).
    func stealNewest(from victim: LaunchQueue) -> Unmanaged<Coroutine>? {
        guard victim.lifoHint.load(ordering: .relaxed) > 0 else { return nil }
        for i in 0..<Self.lifoCapacity where victim.lifo[i].load(ordering: .relaxed) != 0 {
            let bits = victim.lifo[i].exchange(0, ordering: .acquiringAndReleasing)
            if bits != 0 { return Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped) }
        }
        return nil
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
