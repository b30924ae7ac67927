import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Hands out coroutine stacks and takes them back (see <doc:Stacks>).
///
/// Stacks are pooled per size and reused. Up to ``guardedCap`` stacks live at once as guarded
/// mappings (stack + PROT_NONE guard: two kernel mappings each); beyond the cap, stacks are cut
/// from slabs of many stacks sharing one mapping, protected by a canary word that
/// ``StackAllocator/checkCanary(_:)`` verifies at every suspend. Either way, successive stacks'
/// tops take successive cache colours (page offsets modulo `CCORO_COLOR_SPAN`, stack.c).
///
/// Threading: all methods are thread-safe (one `Mutex`); the hot path is one uncontended lock.
final class StackAllocator: Sendable {
    static let shared = StackAllocator()

    /// Bytes of the default stack.
    static let defaultStackSize = 256 * 1024
    /// Stacks are rounded up to this granularity.
    static let granularity = 16 * 1024
    /// The largest stack accepted.
    static let maximumStackSize = 64 * 1024 * 1024
    /// Stacks per slab mapping.
    static let slabCount = 1024
    /// At most this many idle guarded stacks of one size are kept; more are unmapped.
    static let poolLimit = 32_768
    /// Stacks each scheduler keeps for itself (default size only), taken without the lock.
    static let schedulerCacheLimit = 128

    /// The number of guarded stacks that may be live at once.
    let guardedCap: Int

    /// A stack record handed between threads under the lock (it is owned by one party at a time).
    private struct Ref: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<ccoro_stack_record>
    }

    /// Idle stacks of one size, reused last-in first-out; the oldest `trimmedPrefix` entries
    /// have had their memory given back to the kernel (`trim`).
    ///
    /// Aging (a low-water mark, as allocators' scavengers age free memory): `lowWater` is the
    /// fewest entries the pool held since the last trim pass. Last-in first-out, the entries
    /// below it were not taken since that pass: only they may be trimmed by the next one. A
    /// stack given back a moment ago is never trimmed, even when the process has just many of
    /// them: a scheduler parked 50 ms while its peers were busy (`runBlocking` awaiting a pool
    /// fan-out) trimmed the stacks its peers were reusing, 81,000 per skynet run, each faulted
    /// in again.
    private struct Pool {
        var stacks: [Ref] = []
        var trimmedPrefix = 0
        var lowWater = 0

        mutating func popLast() -> Ref? {
            guard let r = stacks.popLast() else { return nil }
            trimmedPrefix = min(trimmedPrefix, stacks.count)
            lowWater = min(lowWater, stacks.count)
            return r
        }

        /// Removes the entries idle since the last pass (below `lowWater`) beyond the newest
        /// `keep` whose memory may still be resident, and starts the next aging interval. They
        /// are out of the pool (nobody can take them) while their memory is released.
        mutating func removeUntrimmed(keeping keep: Int) -> [Ref] {
            let end = min(stacks.count - keep, lowWater)
            lowWater = stacks.count
            guard end > trimmedPrefix else { return [] }
            let removed = Array(stacks[trimmedPrefix..<end])
            stacks.removeSubrange(trimmedPrefix..<end)
            lowWater -= removed.count
            return removed
        }

        /// Whether entries beyond the newest `keep` are still resident (a later pass trims them
        /// once they have aged).
        func hasUntrimmed(keeping keep: Int) -> Bool { stacks.count - keep > trimmedPrefix }

        /// Puts released stacks back, oldest first, among the trimmed ones.
        mutating func insertTrimmed(_ released: [Ref]) {
            let at = min(trimmedPrefix, stacks.count)
            stacks.insert(contentsOf: released, at: at)
            trimmedPrefix = at + released.count
            lowWater += released.count
        }
    }

    /// Pools by stack size. A process uses a handful of sizes, so the lookup is a scan of an
    /// array: a `Dictionary`'s modify accessor allocated its frame on the heap at every `give`.
    /// Pools are never removed, so an index stays valid (``removeUntrimmed(keeping:)`` and
    /// ``insertTrimmed(_:)`` rely on it).
    private struct PoolsBySize {
        private var sizes: [Int] = []
        private var pools: [Pool] = []

        /// The index of the pool for `size`, created empty if needed.
        private mutating func index(creating size: Int) -> Int {
            if let i = sizes.firstIndex(of: size) { return i }
            sizes.append(size)
            pools.append(Pool())
            return sizes.count - 1
        }

        /// Takes the newest idle stack of `size`.
        mutating func popLast(size: Int) -> Ref? {
            guard let i = sizes.firstIndex(of: size) else { return nil }
            return pools[i].popLast()
        }

        /// Takes the newest idle stack of any size but `size`.
        mutating func popLast(otherThan size: Int) -> Ref? {
            for i in pools.indices where sizes[i] != size {
                if let r = pools[i].popLast() { return r }
            }
            return nil
        }

        /// Adds `r` to the pool of `size` unless that pool already holds `limit` stacks.
        /// - Returns: whether `r` was added.
        @discardableResult
        mutating func append(_ r: Ref, size: Int, limit: Int = .max) -> Bool {
            let i = index(creating: size)
            guard pools[i].stacks.count < limit else { return false }
            pools[i].stacks.append(r)
            return true
        }

        mutating func append(contentsOf rs: [Ref], size: Int) {
            pools[index(creating: size)].stacks.append(contentsOf: rs)
        }

        /// Takes out, per pool, the stacks ``Pool/removeUntrimmed(keeping:)`` gives.
        mutating func removeUntrimmed(keeping keep: Int) -> [[Ref]] {
            pools.indices.map { pools[$0].removeUntrimmed(keeping: keep) }
        }

        /// Whether any pool has resident entries beyond the newest `keep`.
        func hasUntrimmed(keeping keep: Int) -> Bool { pools.contains { $0.hasUntrimmed(keeping: keep) } }

        /// Puts back what ``removeUntrimmed(keeping:)`` took, now trimmed.
        mutating func insertTrimmed(_ removed: [[Ref]]) {
            for (i, rs) in removed.enumerated() where !rs.isEmpty { pools[i].insertTrimmed(rs) }
        }
    }

    private struct State {
        var pools = PoolsBySize()
        var guardedLive = 0          // guarded stacks mapped (in use or pooled)
        var slabFree = PoolsBySize()
        var inUse = 0
        var pooled = 0
    }
    private let state = Mutex(State())
    /// Stacks given back since the last `trim` (a cheap hint for idle schedulers).
    private let givenSinceTrim = Atomic<Int>(0)
    /// `givenSinceTrim` as the previous ``trimIfNeeded(interval:)`` pass read it, and when
    /// (``ccoro_now_ns()``) that pass began.
    private let givenAtLastPass = Atomic<Int>(0)
    private let lastPassAt = Atomic<UInt64>(0)
    /// Idle stacks per size whose memory stays resident for quick reuse; older idle stacks are
    /// trimmed (their pages given back) when a scheduler goes idle.
    static let residentIdleLimit = 256

    private init() {
        let maxMaps = ccoro_max_map_count()
        if maxMaps < 0 {
            guardedCap = Int.max
        } else {
            let current = max(Int(ccoro_current_map_count()), 0)
            let reserve = Int(maxMaps) / 4
            guardedCap = max((Int(maxMaps) - current - reserve) / 2, 0)
            if ProcessInfoLite.environment("COROUTINES_QUIET") == nil {
                let line = "swift-coroutines: up to \(guardedCap) guarded stacks (vm.max_map_count \(maxMaps)); slab stacks with canaries beyond\n"
                line.withCString { _ = write(2, $0, strlen($0)) }
            }
        }
    }

    /// Rounds a requested stack size to the allocator's granularity.
    ///
    /// - Precondition: `requested` is in `1...64 MiB`.
    static func normalizedSize(_ requested: Int?) -> Int {
        guard let requested else { return defaultStackSize }
        // fatalError, not precondition: the message must survive release builds.
        if requested <= 0 { fatalError("stackSize must be positive (got \(requested))") }
        if requested > maximumStackSize { fatalError("stackSize must be at most 64 MiB (got \(requested))") }
        let g = granularity
        return max(g, (requested + g - 1) / g * g)
    }

    /// Takes a stack of `size` bytes (already normalised), or nil when none can be mapped.
    func take(size: Int) -> UnsafeMutablePointer<ccoro_stack_record>? {
        let got: Ref? = state.locked { s in
            if let r = s.pools.popLast(size: size) {
                s.pooled -= 1
                s.inUse += 1
                return r
            }
            if let r = s.slabFree.popLast(size: size) {
                s.inUse += 1
                return r
            }
            return nil
        }
        if let got {
            prepareForUse(got.pointer)
            return got.pointer
        }
        // Map outside the lock.
        if let r = mapFresh(size: size) {
            prepareForUse(r)
            return r
        }
        return nil
    }

    func prepareForUse(_ r: UnsafeMutablePointer<ccoro_stack_record>) {
        ccoro_stack_unpoison(&r.pointee.stack)
        ccoro_stack_arm_canary(&r.pointee.stack)
        r.pointee.fake_stack = nil
    }

    private func mapFresh(size: Int) -> UnsafeMutablePointer<ccoro_stack_record>? {
        let (useGuarded, evicted): (Bool, Ref?) = state.locked { s in
            if s.guardedLive < guardedCap { s.guardedLive += 1; return (true, nil) }
            // At the cap: an idle guarded stack of another size makes room (one out, one in),
            // so one size's idle stacks never condemn every other size to slab stacks.
            if let r = s.pools.popLast(otherThan: size) {
                s.pooled -= 1
                return (true, r)
            }
            return (false, nil)
        }
        if let evicted {
            ccoro_stack_unmap_guarded(&evicted.pointer.pointee.stack)
            evicted.pointer.deallocate()
        }
        if useGuarded {
            let r = UnsafeMutablePointer<ccoro_stack_record>.allocate(capacity: 1)
            r.initialize(to: ccoro_stack_record())
            if ccoro_stack_map_guarded(size, &r.pointee.stack) == 0 {
                state.locked { $0.inUse += 1 }
                return r
            }
            r.deallocate()
            state.locked { $0.guardedLive -= 1 }
            return nil
        }
        let count = Self.slabCount
        let stacks = UnsafeMutablePointer<ccoro_stack>.allocate(capacity: count)
        defer { stacks.deallocate() }
        guard ccoro_stack_map_slab(size, count, stacks) == 0 else { return nil }
        var records: [UnsafeMutablePointer<ccoro_stack_record>] = []
        records.reserveCapacity(count)
        for i in 0..<count {
            let r = UnsafeMutablePointer<ccoro_stack_record>.allocate(capacity: 1)
            r.initialize(to: ccoro_stack_record())
            r.pointee.stack = stacks[i]
            records.append(r)
        }
        // Hand out from the top of the slab downwards so that a slot's lower neighbour (which
        // holds its canary) is usually already in use and resident.
        let first = records.removeLast()
        let rest = records.map(Ref.init)
        state.locked { s in
            s.slabFree.append(contentsOf: rest, size: size)
            s.inUse += 1
        }
        return first
    }

    /// Returns a stack to the pool. The coroutine that used it has finished or was unwound, so
    /// no exclusivity access record on it is live.
    func give(_ r: UnsafeMutablePointer<ccoro_stack_record>) {
        let size = Int(r.pointee.stack.class_size)
        let isSlab = r.pointee.stack.is_slab != 0
        let record = Ref(pointer: r)
        let unmap: Bool = state.locked { s in
            s.inUse -= 1
            if isSlab {
                s.slabFree.append(record, size: size)
                return false
            }
            if s.pools.append(record, size: size, limit: Self.poolLimit) {
                s.pooled += 1
                return false
            }
            s.guardedLive -= 1
            return true
        }
        if unmap {
            ccoro_stack_unmap_guarded(&r.pointee.stack)
            r.deallocate()
        }
        givenSinceTrim.add(1, ordering: .relaxed)
    }

    /// Whether enough stacks were given back since the last trim for ``trimIfNeeded(interval:)`` to act.
    var needsTrim: Bool { givenSinceTrim.load(ordering: .relaxed) > Self.residentIdleLimit }

    /// Gives the memory of old idle stacks back to the kernel: those idle since the previous
    /// pass, beyond the newest ``residentIdleLimit`` of each size (see `Pool`'s aging), and only
    /// once the process is quiet: a pass during which stacks were given back (other schedulers
    /// are busy) releases nothing, it only starts the next interval. Called by schedulers that
    /// have stayed parked for a while, so the system calls happen when there is nothing else to
    /// do (<doc:Stacks>: a finished coroutine's memory is released); while resident idle stacks
    /// remain, ``needsTrim`` stays true, so a scheduler still parked comes back for them.
    /// Thread-safe.
    func trimIfNeeded(interval: UInt64 = CoroutineScheduler.idleTrimDelay) {
        let given = givenSinceTrim.load(ordering: .relaxed)
        guard given > Self.residentIdleLimit else { return }
        // One pass per interval, whichever parked scheduler makes it: two passes moments apart
        // would find the process "quiet" between them.
        let now = ccoro_now_ns()
        let last = lastPassAt.load(ordering: .relaxed)
        guard now &- last >= interval,
              lastPassAt.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        // Quiet: nothing was given back since the previous pass (the counter still reads what
        // that pass saw). Else only the aging interval restarts.
        let quiet = givenAtLastPass.exchange(given, ordering: .relaxed) == given
        // Taken out of the pools under the lock, released outside it, then put back: a stack is
        // never handed out while its memory is being released.
        let victims: (guarded: [[Ref]], slab: [[Ref]]) = state.locked { s in
            (s.pools.removeUntrimmed(keeping: quiet ? Self.residentIdleLimit : .max),
             s.slabFree.removeUntrimmed(keeping: quiet ? Self.residentIdleLimit : .max))
        }
        for r in victims.guarded.joined() { ccoro_stack_release_memory(&r.pointer.pointee.stack) }
        for r in victims.slab.joined() { ccoro_stack_release_memory(&r.pointer.pointee.stack) }
        let rest = state.locked { s in
            s.pools.insertTrimmed(victims.guarded)
            s.slabFree.insertTrimmed(victims.slab)
            return s.pools.hasUntrimmed(keeping: Self.residentIdleLimit)
                || s.slabFree.hasUntrimmed(keeping: Self.residentIdleLimit)
        }
        if !rest {
            // Everything idle is trimmed: the count starts again (stacks given back meanwhile
            // are not lost, only counted late: they are trimmed by a later pass).
            givenSinceTrim.store(0, ordering: .relaxed)
            givenAtLastPass.store(0, ordering: .relaxed)
        }
    }

    /// Stacks currently handed out (for tests and `dumpAll`): those counted in use by `state`,
    /// less those idle in schedulers' private caches.
    ///
    /// Exact while no scheduler starts or finishes coroutines (and, in particular, once they have
    /// stopped). While they do, stacks move between caches and the pool during the reads: the
    /// caches are read before and after the count, and again until both readings agree (a
    /// stopping scheduler leaves the directory before it gives its cache back), so the figure is
    /// a recent one, not a mix that could even be negative. O(schedulers) per reading, at most
    /// 1,000 readings.
    var stacksInUse: Int {
        func cached() -> Int {
            SchedulerDirectory.shared.all.reduce(0) { $0 + $1.cachedStacks.load(ordering: .acquiring) }
        }
        var before = cached()
        for _ in 0..<1_000 {
            let inUse = state.locked { $0.inUse }
            let after = cached()
            if after == before { return inUse - after }
            before = after
        }
        // Caches changing under every reading (busy schedulers): the latest, never negative.
        return max(0, state.locked { $0.inUse } - cached())
    }
    /// Guarded stacks idle in the pool.
    var stacksPooled: Int { state.locked { $0.pooled } }
}

/// Environment lookup without Foundation.
enum ProcessInfoLite {
    static func environment(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        return String(cString: v)
    }
}
