import Synchronization
/// A binary min-heap of timers with O(log n) removal of any timer (each node knows its index).
///
/// Invariant: `nodes[i].heapIndex == i` for every node, and a parent's (deadline, sequence) is
/// never greater than its children's.
struct TimerHeap {
    private(set) var nodes: [TimerNode] = []
    private var sequence: UInt64 = 0

    var count: Int { nodes.count }
    var nextDeadline: UInt64? { nodes.first?.deadline }

    mutating func schedule(deadline: UInt64, _ action: @escaping () -> Void) -> TimerNode {
        sequence &+= 1
        let node = TimerNode(deadline: deadline, sequence: sequence, action: action)
        node.heapIndex = nodes.count
        nodes.append(node)
        siftUp(nodes.count - 1)
        return node
    }

    /// Removes `node` if it is armed. - Complexity: O(log n).
    mutating func remove(_ node: TimerNode) {
        let i = node.heapIndex
        guard i >= 0, i < nodes.count, nodes[i] === node else { return }
        let last = nodes.count - 1
        if i != last {
            swapAt(i, last)
        }
        nodes.removeLast()
        node.heapIndex = -1
        node.action = nil
        node.handle = nil
        if i < nodes.count {
            siftDown(i)
            siftUp(i)
        }
    }

    /// Removes and returns the earliest timer if it is due at `now`.
    mutating func popDue(now: UInt64) -> TimerNode? {
        guard let first = nodes.first, first.deadline <= now else { return nil }
        let last = nodes.count - 1
        if last > 0 { swapAt(0, last) }
        nodes.removeLast()
        first.heapIndex = -1
        if !nodes.isEmpty { siftDown(0) }
        return first
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        let x = nodes[a], y = nodes[b]
        return x.deadline < y.deadline || (x.deadline == y.deadline && x.sequence < y.sequence)
    }

    private mutating func swapAt(_ a: Int, _ b: Int) {
        nodes.swapAt(a, b)
        nodes[a].heapIndex = a
        nodes[b].heapIndex = b
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(i, parent) else { break }
            swapAt(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < nodes.count && less(l, m) { m = l }
            if r < nodes.count && less(r, m) { m = r }
            if m == i { return }
            swapAt(i, m)
            i = m
        }
    }
}
