import Synchronization

/// A pool's shared queue of unstarted pool launches: launches made outside the pool's
/// schedulers, and the older half of a scheduler's full ``LaunchQueue`` (Go's global run queue,
/// `globrunqput`/`globrunqget` in `runtime/proc.go`; see <doc:PoolsAndStealing>).
///
/// Launches are kept as their raw words (``LaunchQueue/Words``), in chunks of
/// ``chunkCapacity``: moving a batch in or out copies words and touches no reference count.
///
/// ## Invariants
/// - Every launch in the queue is in exactly one chunk, between its `start` and `end`; chunks
///   are linked oldest first, from `first` to `last`; a chunk with `start == end` is freed at
///   once (only the last chunk may be empty, and only while it is being filled).
/// - `count` is the number of launches in all chunks; `launchCount` equals it whenever the lock
///   is free.
/// - After ``close()``, nothing is appended: ``append(_:)`` returns false.
///
/// ## Who calls what
/// Any thread: ``append(_:)``, ``take(max:share:into:)``, ``close()``, ``launchCount``. Each
/// takes the lock once.
final class SharedLaunchQueue: @unchecked Sendable {
    /// Launches per chunk: half a ``LaunchQueue``, the size of a scheduler's overflow.
    static let chunkCapacity = Int(LaunchQueue.capacity) / 2 + 1

    private struct Chunk {
        var next: UnsafeMutablePointer<Chunk>?
        var start = 0
        var end = 0
        /// `chunkCapacity` words follow the header (see ``entries(_:)``).
    }

    private struct State {
        var first: UnsafeMutablePointer<Chunk>?
        var last: UnsafeMutablePointer<Chunk>?
        var count = 0
        var closed = false
    }

    /// Guards `state` (a futex lock: held for a few copies, it does not spin).
    private let lock = FutexLock()
    /// Read and written only inside ``locked(_:)``.
    @exclusivity(unchecked) private var state = State()

    @inline(__always)
    private func locked<R>(_ body: (inout State) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
    /// How many launches it holds, read without the lock.
    let launchCount = Atomic<Int>(0)

    deinit {
        // A pool is only freed after it stopped (its threads keep it alive until then), and
        // `close()` emptied it.
        var chunk = locked { $0.first }
        while let c = chunk {
            chunk = c.pointee.next
            Self.free(c)
        }
    }

    /// Appends `launches` (which the queue now owns), oldest first. Returns false, owning
    /// nothing, if the queue is closed.
    /// - Complexity: O(n) copies of words, under the lock.
    func append(_ launches: UnsafeBufferPointer<LaunchQueue.Words>) -> Bool {
        let accepted = locked { s -> Bool in
            if s.closed { return false }
            var i = 0
            while i < launches.count {
                if s.last == nil || s.last!.pointee.end == Self.chunkCapacity {
                    let c = Self.allocate()
                    if let last = s.last { last.pointee.next = c } else { s.first = c }
                    s.last = c
                }
                let c = s.last!
                let n = Swift.min(Self.chunkCapacity - c.pointee.end, launches.count - i)
                Self.entries(c).advanced(by: c.pointee.end)
                    .update(from: launches.baseAddress!.advanced(by: i), count: n)
                c.pointee.end += n
                i += n
            }
            s.count += launches.count
            return true
        }
        // Sequentially consistent (a locked add): ordered before the idle count that the
        // launcher loads next, against a parking scheduler, which counts itself idle and then
        // loads this.
        if accepted { launchCount.add(launches.count, ordering: .sequentiallyConsistent) }
        return accepted
    }

    /// Takes the oldest `min(count / share + 1, count, max)` launches, handing each to `body`
    /// oldest first (Go's `globrunqget`: a scheduler takes its share, not everything).
    /// Returns how many. `body` runs under the lock: it must only store the words.
    func take(max: Int, share: Int, into body: (LaunchQueue.Words) -> Void) -> Int {
        guard launchCount.load(ordering: .relaxed) > 0 else { return 0 }
        let n = locked { s -> Int in
            let n = Swift.min(s.count / share + 1, s.count, max)
            var left = n
            while left > 0, let c = s.first {
                let k = Swift.min(left, c.pointee.end - c.pointee.start)
                let base = Self.entries(c).advanced(by: c.pointee.start)
                for j in 0..<k { body(base[j]) }
                c.pointee.start += k
                left -= k
                if c.pointee.start == c.pointee.end {
                    s.first = c.pointee.next
                    if s.first == nil { s.last = nil }
                    Self.free(c)
                }
            }
            s.count -= n
            return n
        }
        if n > 0 { launchCount.subtract(n, ordering: .relaxed) }
        return n
    }

    /// Closes the queue and returns what it held, oldest first (the caller owns it now).
    func close() -> [LaunchQueue.Words] {
        let all = locked { s -> [LaunchQueue.Words] in
            s.closed = true
            var all: [LaunchQueue.Words] = []
            all.reserveCapacity(s.count)
            while let c = s.first {
                let base = Self.entries(c)
                for j in c.pointee.start..<c.pointee.end { all.append(base[j]) }
                s.first = c.pointee.next
                Self.free(c)
            }
            s.last = nil
            s.count = 0
            return all
        }
        launchCount.store(0, ordering: .sequentiallyConsistent)
        return all
    }

    private static let entriesOffset = (MemoryLayout<Chunk>.stride + 15) & ~15

    private static func allocate() -> UnsafeMutablePointer<Chunk> {
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: entriesOffset + chunkCapacity * MemoryLayout<LaunchQueue.Words>.stride, alignment: 16)
        let c = raw.bindMemory(to: Chunk.self, capacity: 1)
        c.initialize(to: Chunk())
        (raw + entriesOffset).bindMemory(to: LaunchQueue.Words.self, capacity: chunkCapacity)
        return c
    }

    private static func entries(_ c: UnsafeMutablePointer<Chunk>) -> UnsafeMutablePointer<LaunchQueue.Words> {
        (UnsafeMutableRawPointer(c) + entriesOffset).assumingMemoryBound(to: LaunchQueue.Words.self)
    }

    private static func free(_ c: UnsafeMutablePointer<Chunk>) {
        c.deinitialize(count: 1)
        UnsafeMutableRawPointer(c).deallocate()
    }
}
