/// A FIFO list of waiters that stores the first one inline, so the common case — one waiter —
/// allocates nothing, and the list takes two words beside it (a promise holds two lists).
///
/// The others are in `rest`, a ``WaiterListOverflow`` created at the second waiter: an array
/// read from a head index, so taking the first waiter moves the index instead of shifting the
/// array (shifting made draining n waiters — an unlock or release per waiter — cost O(n²) under
/// the primitive's lock).
///
/// A waiter that withdraws (cancelled, timed out) is removed at once from the front or from a
/// short list; from a long one it stays as a *tombstone* — a ticket already claimed, which
/// every pop skips (``popClaimed()``) — and the tombstones are dropped together once they could
/// be half of the list. So withdrawal is O(1) amortised at any length, and the list's memory stays
/// proportional to its live waiters (at most about twice as many entries).
///
/// Invariants: `first == nil` ⇒ `rest` holds no waiter. `rest` is copied on write (a list is a
/// value: the state machines move lists out and reset them). Only claimed tickets are ever left
/// as tombstones.
///
/// Not thread-safe: lives inside a lock-protected state.
@usableFromInline
struct WaiterList<Element> {
    @usableFromInline var first: Element?
    /// The waiters after the first, in order; nil until a second one comes.
    @usableFromInline var rest: WaiterListOverflow<Element>?

    @inlinable init() {}

    @inlinable var isEmpty: Bool { first == nil }

    /// Entries held, tombstones included (see above). - Complexity: O(1).
    var entryCount: Int { first == nil ? 0 : 1 + (rest?.count ?? 0) }

    /// Queues `e` at the back.
    /// - Complexity: O(1) amortised.
    @inlinable mutating func append(_ e: Element) {
        if first == nil { first = e } else { uniqueRest().append(e) }
    }

    /// Removes the first element matching `predicate` and returns it.
    /// - Complexity: O(n).
    @inlinable mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        if let f = first, predicate(f) {
            first = takeFromRest()
            return f
        }
        // No binding of `rest` may live across `uniqueRest()`: a second reference makes it copy
        // the whole overflow (O(n) per call; an unlock of a 100,000-waiter mutex took ms).
        guard rest?.contains(where: predicate) == true else { return nil }
        return uniqueRest().remove(where: predicate)
    }

    /// Withdraws `ticket`, whose suspension its canceller or timeout has claimed (so a pop would
    /// skip it): removed at once if it is the first waiter or the list is short (at most
    /// ``WaiterListOverflow/exactWithdrawalLimit`` after the first); otherwise left as a
    /// tombstone, and all of them dropped in one pass once tombstones may be half the list.
    /// - Complexity: O(1) amortised.
    @inlinable mutating func withdraw(_ ticket: WaitTicket) where Element == WaitTicket {
        if let f = first, f.matches(ticket) {
            first = takeLiveFromRest()
            return
        }
        guard rest?.isEmpty == false else { return }
        let o = uniqueRest()
        if o.count <= WaiterListOverflow<Element>.exactWithdrawalLimit {
            _ = o.remove { $0.matches(ticket) }
            return
        }
        o.withdrawn += 1
        if o.withdrawn * 2 > o.count {
            o.removeAll { $0.isStale }
            o.withdrawn = 0
        }
    }

    /// Removes and returns the first element.
    /// - Complexity: O(1) amortised.
    @inlinable mutating func popFirst() -> Element? {
        guard let f = first else { return nil }
        first = takeFromRest()
        return f
    }

    /// The next of `rest`, taken, or nil.
    @inlinable mutating func takeFromRest() -> Element? {
        guard rest?.isEmpty == false else { return nil }
        return uniqueRest().popFirst()
    }

    /// `rest`, created if absent and copied if shared, to be changed.
    @inlinable mutating func uniqueRest() -> WaiterListOverflow<Element> {
        if rest == nil {
            rest = WaiterListOverflow()
        } else if !isKnownUniquelyReferenced(&rest!) {
            rest = rest!.copy()
        }
        return rest.unsafelyUnwrapped
    }

    /// Removes and returns the first ticket that can still be claimed (``WaitTicket/tryClaim()``),
    /// dropping stale ones (cancelled or timed-out waiters) on the way.
    @inlinable mutating func popClaimed() -> Element? where Element == WaitTicket {
        while let t = first {
            first = takeLiveFromRest()
            if t.tryClaim() { return t }
        }
        return nil
    }

    /// The next live waiter of `rest`, taken, dropping the tombstones before it. `first` is never
    /// a tombstone: a waiter withdrawn while in `rest` must not move up to `first`, where no
    /// later withdrawal would find it (its own already happened) and it would keep its coroutine
    /// alive until the next pop.
    @inlinable mutating func takeLiveFromRest() -> Element? where Element == WaitTicket {
        while let t = takeFromRest() {
            if !t.isStale { return t }
        }
        return nil
    }

    /// Calls `body` on every element in FIFO order.
    /// - Complexity: O(n).
    @inlinable func forEach(_ body: (Element) -> Void) {
        guard let first else { return }
        body(first)
        rest?.forEach(body)
    }
}

/// The waiters of a ``WaiterList`` after its first: `items[head...]`, in order.
///
/// A taken slot is emptied at once (`nil`): it must not keep its waiter (a ticket holds its
/// coroutine) alive. The taken prefix is dropped once it is over half of the array, so the
/// memory stays proportional to the waiters.
///
/// Not thread-safe: owned by one list, inside a lock-protected state.
@usableFromInline
final class WaiterListOverflow<Element> {
    @usableFromInline var items: [Element?] = []
    /// The index in `items` of the next waiter; `items[..<head]` were taken already.
    @usableFromInline var head = 0
    /// Withdrawals left as tombstones since the last pass that dropped them (an upper bound:
    /// pops also drop tombstones).
    @usableFromInline var withdrawn = 0
    /// Up to this many waiters here, a withdrawal removes its waiter at once (a short search).
    @inlinable static var exactWithdrawalLimit: Int { 32 }

    @inlinable init() {}

    /// Waiters held.
    @inlinable var count: Int { items.count - head }
    @inlinable var isEmpty: Bool { head == items.count }

    @inlinable func append(_ e: Element) { items.append(e) }

    /// Takes the first waiter off. Not empty.
    @inlinable func popFirst() -> Element? {
        let e = items[head].take()
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 16 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return e
    }

    @inlinable func contains(where predicate: (Element) -> Bool) -> Bool {
        items[head...].contains { predicate($0!) }
    }

    /// Removes the first waiter matching `predicate` and returns it.
    /// - Complexity: O(n).
    @inlinable func remove(where predicate: (Element) -> Bool) -> Element? {
        guard let i = items[head...].firstIndex(where: { predicate($0!) }) else { return nil }
        return items.remove(at: i)
    }

    /// Removes every waiter matching `predicate`, keeping the others in order.
    /// - Complexity: O(n).
    @inlinable func removeAll(where predicate: (Element) -> Bool) {
        var kept: [Element?] = []
        kept.reserveCapacity(count)
        for e in items[head...] where !predicate(e!) { kept.append(e) }
        items = kept
        head = 0
    }

    @inlinable func forEach(_ body: (Element) -> Void) {
        for e in items[head...] { body(e!) }
    }

    /// A copy holding the same waiters (copy on write of ``WaiterList``).
    @inlinable func copy() -> WaiterListOverflow<Element> {
        let c = WaiterListOverflow()
        c.items = Array(items[head...])
        c.withdrawn = withdrawn
        return c
    }
}
