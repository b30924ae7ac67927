import CCoroutines
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Hands out coroutine stacks and takes them back (SPEC §2.2).
///
/// Stacks are pooled per size and reused. Up to ``guardedCap`` stacks live at once as guarded
/// mappings (stack + PROT_NONE guard: two kernel mappings each); beyond the cap, stacks are cut
/// from slabs of many stacks sharing one mapping, protected by a canary word that
/// ``StackAllocator/checkCanary(_:)`` verifies at every suspend.
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

    private struct State {
        var pools: [Int: [Ref]] = [:]
        var guardedLive = 0          // guarded stacks mapped (in use or pooled)
        var slabFree: [Int: [Ref]] = [:]
        var inUse = 0
        var pooled = 0
    }
    private let state = Mutex(State())
    /// Stacks held in schedulers' private caches (counted as in use by `state`).
    let cachedInSchedulers = Atomic<Int>(0)

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
            if let r = s.pools[size]?.popLast() {
                s.pooled -= 1
                s.inUse += 1
                return r
            }
            if let r = s.slabFree[size]?.popLast() {
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
        ccoro_stack_arm_canary(&r.pointee.stack)
        r.pointee.fake_stack = nil
    }

    private func mapFresh(size: Int) -> UnsafeMutablePointer<ccoro_stack_record>? {
        let useGuarded: Bool = state.locked { s in
            if s.guardedLive < guardedCap { s.guardedLive += 1; return true }
            return false
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
            s.slabFree[size, default: []].append(contentsOf: rest)
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
                s.slabFree[size, default: []].append(record)
                return false
            }
            if s.pools[size, default: []].count < Self.poolLimit {
                s.pools[size, default: []].append(record)
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
    }

    /// Stacks currently handed out (for tests and `dumpAll`).
    var stacksInUse: Int { state.locked { $0.inUse } - cachedInSchedulers.load(ordering: .relaxed) }
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
