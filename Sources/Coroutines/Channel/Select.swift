/// Waits on several channel operations and runs exactly one of them (Go's `select`).
///
/// ```swift
/// let text = try select { s in
///     s.receive(from: numbers) { n in "number \(n ?? -1)" }
///     s.send("ping", to: pings) { "sent ping" }
///     s.timeout(after: .seconds(1)) { "nothing for a second" }
/// }
/// ```
///
/// Among the cases that are ready, one is chosen uniformly at random. A receive case on a
/// closed, drained channel is ready and gets nil; a send case on a closed channel is ready and
/// makes `select` throw ``ChannelError/closed``. With ``Select/otherwise(_:)`` the select never
/// suspends: `otherwise` runs if no case is ready at the instant of the call. With no cases at
/// all, `select` suspends until the coroutine is cancelled (Go's `select {}`). A select's own
/// send case never pairs with its own receive case. The case bodies run after the channel
/// operation, outside every lock.
///
/// - Parameter build: Adds the cases to the ``Select`` it is given.
/// - Returns: The value of the body of the case that ran.
/// - Throws: What the chosen body throws; ``ChannelError/closed`` for a send case on a closed
///   channel; `CancellationError` if the coroutine is cancelled (checked first);
///   `CoroutineError.timedOut` inside an expiring `withTimeout`;
///   `CoroutineError.notInCoroutine` outside a coroutine.
/// - Suspends: while no case is ready (unless there is an `otherwise`); resumes on the
///   coroutine's own scheduler.
/// - Complexity: O(cases²) to sort the channels into address order (insertion sort: a select has
///   a handful of cases), plus O(1) per case to withdraw the losing cases after a wait.
///   No heap allocation for up to four cases whose values are small (the cases live on the
///   coroutine's stack), except for the timer of a waiting `timeout` case.
///
/// - Thread-safety: call it from a coroutine; the channels may be shared with any thread.
///
/// The algorithm is Go's (runtime `select.go`, `selectgo`): lock every channel in address
/// order, poll the cases in a random order, and if none is ready publish a waiter on every
/// channel with one shared claim, so that exactly one case can win.
@inlinable
public func select<Outcome>(_ build: (inout Select<Outcome>) throws -> Void) throws -> Outcome {
    try Coroutine.withCurrent { current in
        // The cases live in this stack buffer (beyond its capacity, on the heap), so a select
        // over a handful of channels allocates nothing.
        try withUnsafeTemporaryAllocation(byteCount: selectInlineByteCount, alignment: 16) { buffer in
            var s = Select<Outcome>(buffer: buffer)
            defer { s.destroyCases() }
            try build(&s)
            return try s.run(in: current)
        }
    }
}

/// Bytes of the stack buffer of one ``select(_:)``: the records of the first
/// ``selectInlineCaseCapacity`` cases, then their blocks (body closure and value or receive
/// slot: 24 bytes for an `Int` channel) and the `otherwise` and `timeout` bodies.
@inlinable var selectInlineByteCount: Int { 512 }

/// How many case records fit the stack buffer of one ``select(_:)`` before they move to the heap.
@inlinable var selectInlineCaseCapacity: Int { 4 }

/// The cases of one ``select(_:)``, added by its `build` closure.
///
/// Not copyable: it exists only for the duration of the `select` call, and is confined to the
/// selecting coroutine. The cases live in memory on that coroutine's stack; a select with more
/// than four cases, or with large values or element types aligned to more than 16 bytes, puts
/// the excess on the heap.
public struct Select<Outcome>: ~Copyable {
    // Every stored property is trivial, so that the struct itself needs no destruction (which
    // would go through its generic metadata): what the cases own is destroyed by `destroyCases`.

    /// The case records: in the stack buffer while they fit, else on the heap.
    @usableFromInline var cases: UnsafeMutablePointer<SelectCase>
    @usableFromInline var count = 0
    @usableFromInline var capacity: Int
    @usableFromInline var casesOnHeap = false
    /// Room for the lock order and the poll order of `selectInlineCaseCapacity` cases
    /// (2 × capacity + 1 words), after the records in the stack buffer.
    @usableFromInline let scratch: UnsafeMutableRawPointer
    /// The unused part of the stack buffer, for blocks.
    @usableFromInline var arenaNext: UnsafeMutableRawPointer
    @usableFromInline let arenaEnd: UnsafeMutableRawPointer
    /// The `otherwise` body (initialised), if any.
    @usableFromInline var otherwiseBody: UnsafeMutablePointer<() throws -> Outcome>?
    @usableFromInline var otherwiseOnHeap = false
    /// The body of the earliest `timeout` (initialised), if any, and its deadline.
    @usableFromInline var timeoutBody: UnsafeMutablePointer<() throws -> Outcome>?
    @usableFromInline var timeoutOnHeap = false
    @usableFromInline var timeoutDeadline = UInt64.max

    /// Lays out the case records and then the blocks in `buffer`, which outlives the select.
    @inlinable
    init(buffer: UnsafeMutableRawBufferPointer) {
        let base = buffer.baseAddress.unsafelyUnwrapped
        let recordBytes = selectInlineCaseCapacity * MemoryLayout<SelectCase>.stride
        let scratchBytes = (2 * selectInlineCaseCapacity + 1) * MemoryLayout<Int>.stride
        precondition(MemoryLayout<SelectCase>.alignment <= 16 && MemoryLayout<SelectCase>.stride % 8 == 0
                        && recordBytes + scratchBytes < buffer.count,
                     "internal inconsistency: the select stack buffer cannot hold its case records")
        cases = base.bindMemory(to: SelectCase.self, capacity: selectInlineCaseCapacity)
        capacity = selectInlineCaseCapacity
        scratch = base + recordBytes
        arenaNext = scratch + scratchBytes
        arenaEnd = base + buffer.count
    }

    /// Adds a case that receives from `channel`.
    ///
    /// - Parameters:
    ///   - channel: The channel to receive from. It may appear in several cases.
    ///   - body: Runs with the received value, or nil if the channel is closed and drained.
    /// - Complexity: O(1) amortised; no heap allocation for the first four cases of a select
    ///   (unless their values are large).
    @inlinable @inline(__always)
    public mutating func receive<Element>(from channel: Channel<Element>,
                                          _ body: @escaping (Element?) throws -> Outcome) {
        typealias Case = SelectReceiveCase<Element, Outcome>
        let (block, onHeap) = allocateBlock(byteCount: Case.Layout.byteCount, alignment: Case.Layout.alignment)
        block.initializeMemory(as: Case.Body.self, to: body)
        (block + Case.Layout.elementOffset).bindMemory(to: Element.self, capacity: 1)   // the empty slot
        append(SelectCase(channel: channel, operation: { try Case.operate($0, $1, $2) },
                          body: block, element: block + Case.Layout.elementOffset,
                          elementIsTrivial: true, blockOnHeap: onHeap))
    }

    /// Adds a case that sends `value` to `channel`.
    ///
    /// If the channel is (or becomes, while the select waits) closed, this case is ready and the
    /// select throws ``ChannelError/closed``; the value is not delivered. If another case runs,
    /// the value is not delivered either and is destroyed when `select` returns.
    /// - Parameters:
    ///   - value: The value to send if this case is chosen.
    ///   - channel: The channel to send to.
    ///   - body: Runs after the value was taken or buffered.
    /// - Complexity: O(1) amortised; no heap allocation for the first four cases of a select
    ///   (unless their values are large).
    @inlinable @inline(__always)
    public mutating func send<Element>(_ value: Element, to channel: Channel<Element>,
                                       _ body: @escaping () throws -> Outcome) {
        typealias Case = SelectSendCase<Element, Outcome>
        let (block, onHeap) = allocateBlock(byteCount: Case.Layout.byteCount, alignment: Case.Layout.alignment)
        block.initializeMemory(as: Case.Body.self, to: body)
        (block + Case.Layout.elementOffset).initializeMemory(as: Element.self, to: value)
        append(SelectCase(channel: channel, operation: { try Case.operate($0, $1, $2) },
                          body: block, element: block + Case.Layout.elementOffset,
                          elementIsTrivial: _isPOD(Element.self), blockOnHeap: onHeap))
    }

    /// Adds a case that is chosen if nothing else is ready after `duration`.
    ///
    /// A duration ≤ 0 is ready at once (and takes part in the random choice among ready cases).
    /// With several timeouts, the earliest wins. The timer is released when another case wins.
    /// - Complexity: O(1); the wait arms one timer (O(log n) in the scheduler's timers).
    @inlinable
    public mutating func timeout(after duration: Duration, _ body: @escaping () throws -> Outcome) {
        let deadline = deadlineNanoseconds(after: duration)
        if let timeoutBody {
            if deadline < timeoutDeadline {
                timeoutDeadline = deadline
                timeoutBody.pointee = body
            }
        } else {
            let (block, onHeap) = allocateBlock(byteCount: MemoryLayout<() throws -> Outcome>.size,
                                                alignment: MemoryLayout<() throws -> Outcome>.alignment)
            timeoutBody = block.initializeMemory(as: (() throws -> Outcome).self, to: body)
            timeoutOnHeap = onHeap
            timeoutDeadline = deadline
        }
    }

    /// Adds the non-blocking alternative: runs if no case is ready at the instant of the call.
    ///
    /// A second `otherwise` in one select is a precondition failure.
    /// - Complexity: O(1).
    @inlinable
    public mutating func otherwise(_ body: @escaping () throws -> Outcome) {
        precondition(otherwiseBody == nil, "select: a second `otherwise` case; a select takes at most one")
        let (block, onHeap) = allocateBlock(byteCount: MemoryLayout<() throws -> Outcome>.size,
                                            alignment: MemoryLayout<() throws -> Outcome>.alignment)
        otherwiseBody = block.initializeMemory(as: (() throws -> Outcome).self, to: body)
        otherwiseOnHeap = onHeap
    }

    // MARK: Case storage

    /// Memory for one block: from the stack buffer if it fits, else from the heap.
    @inlinable @inline(__always)
    mutating func allocateBlock(byteCount: Int, alignment: Int) -> (UnsafeMutableRawPointer, onHeap: Bool) {
        if alignment <= 16 {
            let start = arenaNext.alignedUp(toMultipleOf: alignment)
            if byteCount <= arenaEnd - start {
                arenaNext = start + byteCount
                return (start, false)
            }
        }
        return (UnsafeMutableRawPointer.allocate(byteCount: Swift.max(byteCount, 1), alignment: alignment), true)
    }

    @inlinable @inline(__always)
    mutating func append(_ selectCase: __owned SelectCase) {
        if count == capacity { growCases() }
        (cases + count).initialize(to: selectCase)
        count += 1
    }

    /// Moves the case records to a heap buffer twice as large.
    @inlinable @inline(never)
    mutating func growCases() {
        let grown = UnsafeMutablePointer<SelectCase>.allocate(capacity: capacity * 2)
        grown.moveInitialize(from: cases, count: count)
        if casesOnHeap { cases.deallocate() }
        cases = grown
        capacity *= 2
        casesOnHeap = true
    }

    /// Destroys every case (its body, and a send case's value), the `otherwise` and `timeout`
    /// bodies, and frees their heap memory. Not inlined, so that `select`'s own code stays small
    /// enough for the `build` closure to be inlined into it.
    @inlinable @inline(never)
    mutating func destroyCases() {
        for i in 0..<count {
            let selectCase = cases + i
            if selectCase.pointee.needsDestroy { _ = selectCase.performNonThrowing(.destroy) }
            // Field by field: copying the record would retain and release its operation.
            // The channel's element type is not known here: release it as a plain object.
            Unmanaged<AnyObject>.fromOpaque(selectCase.pointee.channel).release()
            if selectCase.pointee.blockOnHeap { selectCase.pointee.body.deallocate() }
            selectCase.deinitialize(count: 1)
        }
        if casesOnHeap { cases.deallocate() }
        count = 0
        if let otherwiseBody {
            otherwiseBody.deinitialize(count: 1)
            if otherwiseOnHeap { otherwiseBody.deallocate() }
            self.otherwiseBody = nil
        }
        if let timeoutBody {
            timeoutBody.deinitialize(count: 1)
            if timeoutOnHeap { timeoutBody.deallocate() }
            self.timeoutBody = nil
        }
    }
}
