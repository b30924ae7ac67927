/// One case of a `select`, erased over its channel's element type (the role of Go's `scase`).
///
/// The record is not generic, so a select keeps its cases in one flat buffer on the selecting
/// coroutine's stack, without a heap object per case. What depends on the element type — the
/// channel's state machine, the case's body and value — lives in a typed payload
/// (``SelectReceiveCase`` or ``SelectSendCase``) that `payload` points to, and is reached through
/// `operation`: one closure formed where the element type is known, so that it runs specialised
/// code. It captures nothing there, so forming it allocates nothing. (A generic class's
/// overridden methods, or closures stored in fields typed with the generic parameters, would
/// run unspecialised code or allocate reabstraction thunks.)
///
/// Confined to the selecting coroutine; `closedAtPoll` and `peer` are written under the channel's
/// lock by `poll` and read after unlocking by the same coroutine.
@usableFromInline
struct SelectCase {
    /// Performs one step of the case on its payload. The third argument depends on the step:
    /// a ``Wait`` for `enqueue` and `withdraw`, the uninitialised result (`Outcome`) for
    /// `finish` and `finishClosed`, unused (nil) otherwise. Only the `finish` steps throw. The
    /// result is meaningful for `poll` only (the case was ready).
    @usableFromInline
    typealias Operation = (Step, UnsafeMutablePointer<SelectCase>, UnsafeMutableRawPointer?) throws -> Bool

    /// The steps of a case, in the order of Go's `selectgo`.
    @usableFromInline
    enum Step {
        /// Under the channel's lock: completes the operation now if it can (Go's pass 1).
        case poll
        /// Under the channel's lock: publishes a waiter with the ``Wait``'s ticket (pass 2).
        case enqueue
        /// Takes the channel's lock and removes the waiter published with the ``Wait``'s ticket,
        /// if it is still queued.
        case withdraw
        /// After unlocking (or after the wake that chose this case): runs the body.
        case finish
        /// As `finish`, for a channel found closed: a receive body gets nil, a send throws
        /// ``ChannelError/closed``.
        case finishClosed
        /// Destroys the payload (and a send case's value); the case is never used again.
        case destroy
    }

    /// What `enqueue` publishes and `withdraw` removes: the select's ticket, its shared outcome,
    /// and the index of the case.
    @usableFromInline
    struct Wait {
        @usableFromInline let ticket: WaitTicket
        @usableFromInline let outcome: UnsafeMutablePointer<WaitOutcome>
        @usableFromInline var caseIndex: Int

        @inlinable
        init(ticket: WaitTicket, outcome: UnsafeMutablePointer<WaitOutcome>, caseIndex: Int) {
            self.ticket = ticket
            self.outcome = outcome
            self.caseIndex = caseIndex
        }
    }

    /// The channel's ``ChannelCore``, for locking in address order. Not retained: the payload
    /// holds the strong reference.
    @usableFromInline let channel: UnsafeMutableRawPointer
    @usableFromInline let operation: Operation
    /// The typed payload: aligned memory that `operation` initialised, owned by this case.
    @usableFromInline let payload: UnsafeMutableRawPointer
    @usableFromInline let isSend: Bool
    /// The payload did not fit the select's stack buffer and was allocated on the heap.
    @usableFromInline let payloadOnHeap: Bool
    /// `poll` found the channel closed.
    @usableFromInline var closedAtPoll = false
    /// A blocked peer whose operation `poll` completed (claimed): woken after unlocking.
    @usableFromInline var peer: WaitTicket?

    @inlinable
    init(channel: ChannelCore, operation: @escaping Operation, payload: UnsafeMutableRawPointer,
         isSend: Bool, payloadOnHeap: Bool) {
        self.channel = Unmanaged.passUnretained(channel).toOpaque()
        self.operation = operation
        self.payload = payload
        self.isSend = isSend
        self.payloadOnHeap = payloadOnHeap
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
        do { return try pointee.operation(step, self, argument) } catch {
            preconditionFailure("internal inconsistency: a select step that runs no body threw")
        }
    }

    /// Withdraws the waiter this case published with `ticket`, if it is still queued.
    @inlinable @inline(__always)
    func withdraw(_ ticket: WaitTicket, _ outcome: UnsafeMutablePointer<WaitOutcome>) {
        var wait = SelectCase.Wait(ticket: ticket, outcome: outcome, caseIndex: 0)
        _ = withUnsafeMutablePointer(to: &wait) { performNonThrowing(.withdraw, UnsafeMutableRawPointer($0)) }
    }
}

/// Lays out a payload of type `Payload` followed by one `Element` (a receive case's slot or a
/// send case's value) in one block of memory.
@usableFromInline
enum SelectPayloadLayout<Payload, Element> {
    /// Offset of the `Element` after the payload.
    @inlinable static var elementOffset: Int {
        let a = MemoryLayout<Element>.alignment
        return (MemoryLayout<Payload>.size + a - 1) / a * a
    }

    @inlinable static var byteCount: Int { elementOffset + MemoryLayout<Element>.size }

    @inlinable static var alignment: Int {
        Swift.max(MemoryLayout<Payload>.alignment, MemoryLayout<Element>.alignment)
    }
}
