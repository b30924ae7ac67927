/// One scheduler's records of its edge-triggered registrations (``PollDescriptor``), indexed by
/// descriptor number: Go's `pollDesc` fields `rg`/`wg`/`fdseq`, kept per scheduler.
///
/// Each slot holds the registered owner (a ``PollDescriptor/id``, 0 for none), the registration's
/// sequence number (carried in the poller's datum, so that events of an older registration of the
/// same number are ignored), and per direction the state machine documented on
/// ``PollDescriptor``: idle, ready (an edge arrived while nobody waited), or waiting(ticket).
///
/// Memory: the table grows to the highest descriptor number registered on its scheduler (48
/// bytes a slot) and never shrinks; descriptor numbers are allocated lowest-first, so that is
/// the process's peak number of open descriptors.
///
/// Threading: confined to the owning scheduler's thread (no locks). The tickets it resumes may be
/// claimed concurrently by other threads (close, cancellation, timeout); the claim decides.
struct PollTable {
    /// The record of one descriptor number.
    struct Slot {
        /// The registered ``PollDescriptor/id``; 0 if none (never registered, or it failed).
        var owner: UInt64 = 0
        /// The current registration's sequence number (31 bits, in the poller datum).
        var sequence: UInt32 = 0
        /// An edge arrived while nobody waited to read (Go's `pdReady` in `rg`).
        var readReady = false
        /// An edge arrived while nobody waited to write (Go's `pdReady` in `wg`).
        var writeReady = false
        /// The parked reader (Go's `rg` holding a `g`); never set together with `readReady`.
        var reader: WaitTicket?
        /// The parked writer; never set together with `writeReady`.
        var writer: WaitTicket?
    }

    private var slots: [Slot] = []
    /// How many waiters are parked in the table (the loop polls without blocking only if some are).
    private(set) var waiterCount = 0

    /// The poller datum's tag: set for registrations of this table, clear for one-shot interest
    /// (whose datum is the bare descriptor number).
    static let tag: UInt64 = 1 << 63

    /// Whether `datum` (from the poller) belongs to a registration of this table.
    @inline(__always)
    static func isTagged(_ datum: UInt64) -> Bool { datum & tag != 0 }

    /// Whether `fd` is registered here for `owner`. O(1).
    @inline(__always)
    func isRegistered(fd: Int32, owner: UInt64) -> Bool {
        let i = Int(fd)
        return i < slots.count && slots[i].owner == owner
    }

    /// Makes `owner` the slot's registrant with a new sequence number, forgetting the previous
    /// owner's readiness. Returns the poller datum to register with and the previous owner's
    /// waiters (normally none: a number is reused only after its descriptor was closed, when no
    /// wait is in progress), which the caller resumes so that they re-check their state. O(1)
    /// amortised (the table grows to `fd`).
    mutating func claim(fd: Int32, owner: UInt64) -> (datum: UInt64, leftovers: [WaitTicket]) {
        let i = Int(fd)
        if i >= slots.count { slots += repeatElement(Slot(), count: i + 1 - slots.count) }   // grows geometrically
        var leftovers: [WaitTicket] = []
        if let r = slots[i].reader { leftovers.append(r); waiterCount -= 1 }
        if let w = slots[i].writer { leftovers.append(w); waiterCount -= 1 }
        let sequence = (slots[i].sequence &+ 1) & 0x7fff_ffff
        slots[i] = Slot(owner: owner, sequence: sequence)
        let datum = Self.tag | UInt64(sequence) << 32 | UInt64(UInt32(bitPattern: fd))
        return (datum, leftovers)
    }

    /// Forgets the slot's owner (its registration failed). O(1).
    mutating func release(fd: Int32) {
        slots[Int(fd)].owner = 0
    }

    /// Consumes remembered readiness: true if an edge arrived since the last wait (the direction
    /// goes ready → idle). O(1). Call only for a registered slot.
    @inline(__always)
    mutating func consumeReady(fd: Int32, writable: Bool) -> Bool {
        let i = Int(fd)
        if writable {
            guard slots[i].writeReady else { return false }
            slots[i].writeReady = false
        } else {
            guard slots[i].readReady else { return false }
            slots[i].readReady = false
        }
        return true
    }

    /// Parks `ticket` as the direction's waiter (idle → waiting). Returns a waiter it displaced
    /// (none while owners keep one waiter per direction), which the caller resumes. O(1).
    mutating func setWaiter(fd: Int32, writable: Bool, _ ticket: WaitTicket) -> WaitTicket? {
        let i = Int(fd)
        let displaced: WaitTicket?
        if writable {
            displaced = slots[i].writer
            slots[i].writer = ticket
        } else {
            displaced = slots[i].reader
            slots[i].reader = ticket
        }
        if displaced == nil { waiterCount += 1 }
        return displaced
    }

    /// Removes `ticket` if it is still the direction's waiter of `owner`'s registration
    /// (waiting → idle after a cancellation, timeout or close claimed it). O(1).
    mutating func removeWaiter(fd: Int32, owner: UInt64, writable: Bool, _ ticket: WaitTicket) {
        let i = Int(fd)
        guard i < slots.count, slots[i].owner == owner else { return }
        if writable {
            guard let w = slots[i].writer, w.matches(ticket) else { return }
            slots[i].writer = nil
        } else {
            guard let r = slots[i].reader, r.matches(ticket) else { return }
            slots[i].reader = nil
        }
        waiterCount -= 1
    }

    /// Applies one poller event: each direction reported either resumes its waiter or, with no
    /// waiter (or one already claimed by someone else), becomes ready. Events of a stale
    /// registration (another sequence number, or a released slot) are ignored. O(1).
    mutating func deliver(datum: UInt64, readable: Bool, writable: Bool) {
        let i = Int(UInt32(truncatingIfNeeded: datum))
        let sequence = UInt32(truncatingIfNeeded: datum >> 32) & 0x7fff_ffff
        guard i < slots.count, slots[i].owner != 0, slots[i].sequence == sequence else { return }
        if readable {
            if let r = slots[i].reader {
                slots[i].reader = nil
                waiterCount -= 1
                if !r.resume() { slots[i].readReady = true }
            } else {
                slots[i].readReady = true
            }
        }
        if writable {
            if let w = slots[i].writer {
                slots[i].writer = nil
                waiterCount -= 1
                if !w.resume() { slots[i].writeReady = true }
            } else {
                slots[i].writeReady = true
            }
        }
    }
}
