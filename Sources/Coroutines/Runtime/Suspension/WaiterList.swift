/// A FIFO list of waiters that stores the first one inline, so the common case — one waiter —
/// allocates nothing, and the list takes two words beside it (a promise holds two lists).
///
/// The others are in `rest`, a ``WaiterListOverflow`` created at the second waiter: an array
/// read from a head index, so taking the first waiter moves the index instead of shifting the
/// array (shifting made draining n waiters — an unlock or release per waiter — cost O(n²) under
/// the primitive's lock).
///
/// Invariants: `first == nil` ⇒ `rest` holds no waiter. `rest` is copied on write (a list is a
/// value: the state machines move lists out and reset them).
///
/// Not thread-safe: lives inside a lock-protected state.
@usableFromInline
struct WaiterList<Element> {
    @usableFromInline var first: Element?
    /// The waiters after the first, in order; nil until a second one comes.
    @usableFromInline var rest: WaiterListOverflow<Element>?

    @inlinable init() {}

    @inlinable var isEmpty: Bool { first == nil }

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
        guard let r = rest, r.contains(where: predicate) else { return nil }
        return uniqueRest().remove(where: predicate)
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
        guard let r = rest, !r.isEmpty else { return nil }
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
        while let t = popFirst() {
            if t.tryClaim() { return t }
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

    @inlinable func forEach(_ body: (Element) -> Void) {
        for e in items[head...] { body(e!) }
    }

    /// A copy holding the same waiters (copy on write of ``WaiterList``).
    @inlinable func copy() -> WaiterListOverflow<Element> {
        let c = WaiterListOverflow()
        c.items = Array(items[head...])
        return c
    }
}
