/// One case of a `select`, erased over its channel's element type (the role of Go's `scase`).
///
/// The record is not generic, so a select keeps its cases in one flat buffer on the selecting
/// coroutine's stack, without a heap object per case. What depends on the element type — the
/// channel's state machine, the case's body and value — is reached through `operation`: one
/// closure formed where the element type is known (``SelectReceiveCase/operate(_:_:_:)``,
/// ``SelectSendCase/operate(_:_:_:)``), so that it runs specialised code. It captures nothing
/// there, so forming it allocates nothing. (A generic class's overridden methods, or closures
/// stored in fields typed with the generic parameters, would run unspecialised code or allocate
/// reabstraction thunks; a generic payload struct would be destroyed through its metadata.)
///
/// The body closure and the element (a receive case's slot, or a send case's value) live in one
/// block of memory (``SelectBlockLayout``) owned by the case: normally part of the select's
/// stack buffer, on the heap if it did not fit. Confined to the selecting coroutine.
@usableFromInline
struct SelectCase {
    /// Performs one step of the case on its block. The third argument depends on the step:
    /// a ``Polled`` for `poll`, the case's ``ChannelWaiter`` record for `enqueue` and
    /// `withdraw`, the uninitialised result (`Outcome`) for `finish` and `finishClosed`, unused
    /// (nil) for `destroy`. Only the `finish` steps throw. The result is
    /// meaningful for `poll` only (the case was ready).
    @usableFromInline
    typealias Operation = (Step, UnsafeMutablePointer<SelectCase>, UnsafeMutableRawPointer?) throws -> Bool

    /// The steps of a case, in the order of Go's `selectgo`.
    @usableFromInline
    enum Step {
        /// Under the channel's lock: completes the operation now if it can (Go's pass 1), and
        /// records in the ``Polled`` what is left to do after unlocking.
        case poll
        /// Under the channel's lock: links the case's ``ChannelWaiter`` record into the
        /// channel's senders or receivers (pass 2).
        case enqueue
        /// Takes the channel's lock and unlinks the case's record, if no waker popped it.
        case withdraw
        /// After unlocking (or after the wake that chose this case): runs the body.
        case finish
        /// As `finish`, for a channel found closed: a receive body gets nil, a send throws
        /// ``ChannelError/closed``.
        case finishClosed
        /// Destroys the body closure (and a send case's value); the case is never used again.
        case destroy
    }

    /// What a successful `poll` leaves to do after unlocking.
    @usableFromInline
    struct Polled {
        /// A blocked peer whose operation `poll` completed (claimed): wake it.
        @usableFromInline var peer: ClaimedCoroutine?
        /// The channel was closed: run `finishClosed` instead of `finish`.
        @usableFromInline var closed = false

        @inlinable init() {}
    }

    /// The ``Channel`` (of the case's element type), retained by the case (released by
    /// ``Select/destroyCases()``), so that the channel outlives the select even if the `build`
    /// closure made it.
    @usableFromInline let channel: UnsafeMutableRawPointer
    /// The channel's `lock` (a ``FutexLock`` inside the channel object, so at a fixed address
    /// while the case retains the channel). `select` takes the locks through these addresses,
    /// in their order (Go's `sellock`), without knowing the channels' element types.
    @usableFromInline let lock: UnsafePointer<FutexLock>
    @usableFromInline let operation: Operation
    /// The case's block: the body closure (initialised), then the element.
    @usableFromInline let body: UnsafeMutableRawPointer
    /// The element in the block: a receive case's slot (uninitialised except between the
    /// channel's hand-off and `finish`) or a send case's value (initialised until `destroy`).
    @usableFromInline let element: UnsafeMutableRawPointer
    /// `destroy` has no element to destroy: a receive case, or a send case of a trivial type.
    @usableFromInline let elementIsTrivial: Bool
    /// The block did not fit the select's stack buffer and was allocated on the heap.
    @usableFromInline let blockOnHeap: Bool

    @inlinable @inline(__always)
    init<Element>(channel: Channel<Element>, operation: @escaping Operation, body: UnsafeMutableRawPointer,
         element: UnsafeMutableRawPointer, elementIsTrivial: Bool, blockOnHeap: Bool) {
        self.channel = Unmanaged.passRetained(channel).toOpaque()
        self.lock = channel.lockAddress
        self.operation = operation
        self.body = body
        self.element = element
        self.elementIsTrivial = elementIsTrivial
        self.blockOnHeap = blockOnHeap
    }

    /// Whether `destroy` has anything to do: a send case's non-trivial value, or a body closure
    /// with a context. A closure is stored as two words (Swift's thick function layout: the
    /// function, then its reference-counted context or nil); one that captures nothing has no
    /// context, and destroying it does nothing.
    @inlinable @inline(__always)
    var needsDestroy: Bool {
        assert(MemoryLayout<() -> Void>.size == 2 * MemoryLayout<UnsafeRawPointer>.size,
               "internal inconsistency: a closure is not two words")
        return !elementIsTrivial
            || body.load(fromByteOffset: MemoryLayout<UnsafeRawPointer>.size, as: UnsafeRawPointer?.self) != nil
    }

}

extension UnsafeMutablePointer where Pointee == SelectCase {
    /// Runs `step` of the case this points to.
    @inlinable @inline(__always)
    func perform(_ step: SelectCase.Step, _ argument: UnsafeMutableRawPointer? = nil) throws -> Bool {
        try pointee.operation(step, self, argument)
    }

    /// Runs a step that cannot throw (`poll`, `enqueue`, `withdraw`, `destroy`).
    @inlinable @inline(__always)
    func performNonThrowing(_ step: SelectCase.Step, _ argument: UnsafeMutableRawPointer? = nil) -> Bool {
        // Only the `finish` steps run a body, so only they can throw.
        do { return try perform(step, argument) } catch {
            preconditionFailure("internal inconsistency: a select step that runs no body threw")
        }
    }

    /// Withdraws this case's waiter `record`, if it is still queued.
    @inlinable @inline(__always)
    func withdraw(_ record: UnsafeMutablePointer<ChannelWaiter>) {
        _ = performNonThrowing(.withdraw, UnsafeMutableRawPointer(record))
    }
}

/// Lays out a case's block: its body closure, of type `Body`, followed by one `Element` (a
/// receive case's slot or a send case's value).
@usableFromInline
enum SelectBlockLayout<Body, Element> {
    /// Offset of the `Element` after the body.
    @inlinable static var elementOffset: Int {
        let a = MemoryLayout<Element>.alignment
        return (MemoryLayout<Body>.size + a - 1) / a * a
    }

    @inlinable static var byteCount: Int { elementOffset + MemoryLayout<Element>.size }

    @inlinable static var alignment: Int {
        Swift.max(MemoryLayout<Body>.alignment, MemoryLayout<Element>.alignment)
    }
}
