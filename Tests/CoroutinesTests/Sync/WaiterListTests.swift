import Testing
@testable import Coroutines

/// The FIFO of waiters behind every coroutine mutex, semaphore, wait group and promise.
@Suite("WaiterList")
struct WaiterListTests {
    /// A regression test: it failed before its fix (each pop copied the whole overflow, because
    /// a binding of `rest` made it look shared: draining a 100,000-waiter mutex took minutes).
    @Test("pops and removals change an unshared overflow in place: no copy per operation")
    func unsharedOverflowIsNeverCopied() {
        var list = WaiterList<Int>()
        for i in 0..<100 { list.append(i) }
        let overflow = ObjectIdentifier(list.rest!)
        _ = list.popFirst()
        _ = list.remove { $0 == 50 }
        _ = list.popFirst()
        #expect(ObjectIdentifier(list.rest!) == overflow, "the overflow was copied")
        // A shared one is copied (copy on write), and the copy is then changed in place.
        let shared = list
        _ = list.popFirst()
        #expect(ObjectIdentifier(list.rest!) != overflow)
        #expect(shared.entryCount == list.entryCount + 1)
    }

    @Test("FIFO across the inline first waiter, pops, withdrawals and appends after a drain; the taken prefix does not pile up")
    func fifoAcrossPopsAndWithdrawals() {
        var list = WaiterList<Int>()
        var model: [Int] = []
        var next = 0
        func append(_ k: Int) { for _ in 0..<k { list.append(next); model.append(next); next += 1 } }
        func pop(_ k: Int) {
            for _ in 0..<k {
                #expect(list.popFirst() == (model.isEmpty ? nil : model.removeFirst()))
            }
        }
        append(1); pop(1); pop(1)                  // only the inline one, then empty
        append(5_000); pop(2_600)                 // past half: the taken prefix is dropped
        #expect(list.rest?.count == model.count - 1)
        let slots = list.rest?.items.count ?? 0
        #expect(slots < 5_000, "the taken prefix was kept: \(slots) slots for \(model.count) waiters")
        // Withdraw the head, one in the middle and the last.
        for victim in [model[0], model[model.count / 2], model[model.count - 1]] {
            #expect(list.remove { $0 == victim } == victim)
            model.removeAll { $0 == victim }
        }
        #expect(list.remove { $0 == -1 } == nil)
        append(100); pop(model.count)             // drained to empty, then more
        #expect(list.isEmpty && list.rest?.isEmpty != false)
        append(3); pop(3)
        var seen: [Int] = []
        append(20); list.forEach { seen.append($0) }
        #expect(seen == model)
    }

    @Test("a copy of a list is independent of it: changing one leaves the other's waiters as they were")
    func copiesAreIndependent() {
        var list = WaiterList<Int>()
        for i in 0..<5 { list.append(i) }
        var copy = list
        #expect(copy.popFirst() == 0)
        #expect(copy.popFirst() == 1)
        copy.append(9)
        #expect(list.remove { $0 == 3 } == 3)
        var seen: [Int] = []
        list.forEach { seen.append($0) }
        #expect(seen == [0, 1, 2, 4])
        seen = []
        copy.forEach { seen.append($0) }
        #expect(seen == [2, 3, 4, 9])
    }

    @Test("a waiter taken off the list is no longer held by it (a ticket keeps its coroutine alive)")
    func takenWaiterIsReleased() {
        final class Waiter {}
        var list = WaiterList<Waiter>()
        weak var second: Waiter?
        do {
            let (a, b, c) = (Waiter(), Waiter(), Waiter())
            second = b
            list.append(a); list.append(b); list.append(c)
        }
        #expect(list.popFirst() != nil)
        #expect(list.popFirst() != nil)   // the second, from the array
        #expect(second == nil, "the list still holds a waiter it handed out")
        #expect(list.popFirst() != nil)
        #expect(list.isEmpty)
    }
}
