import Synchronization

/// The Swift-concurrency peer of `Channel` for the benchmarks (README.md, Benchmarks): a
/// rendezvous/bounded channel on continuations + `Mutex`, with a lock-only fast path and every
/// resumption outside the lock. `K` selects `UnsafeContinuation` or `CheckedContinuation`.
///
/// `receive()` returns nil and `send` returns false once the channel is closed (so that a sieve
/// of tasks can be torn down).
final class PeerChannel<K: PeerContinuationKind>: Sendable {
    typealias T = Int
    private struct State {
        var buffer: [T] = []
        var head = 0
        var closed = false
        var receivers: [K.Receiver] = []
        var receiverHead = 0
        var senders: [(T, K.Sender)] = []
        var senderHead = 0
        var buffered: Int { buffer.count - head }
    }

    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int = 0) { self.capacity = capacity }

    func send(_ value: T) async -> Bool {
        let fast: SendFast<K> = state.withLock { s in
            if s.closed { return .closed }
            if s.receiverHead < s.receivers.count {
                let r = s.receivers[s.receiverHead]
                s.receiverHead += 1
                if s.receiverHead == s.receivers.count { s.receivers.removeAll(keepingCapacity: true); s.receiverHead = 0 }
                return .delivered(r)
            }
            if s.buffered < capacity { s.buffer.append(value); return .buffered }
            return .wait
        }
        switch fast {
        case .delivered(let r): K.resume(r, with: value); return true
        case .buffered: return true
        case .closed: return false
        case .wait: break
        }
        return await K.suspendSender { k in
            let slow: SendFast<K> = state.withLock { s in
                if s.closed { return .closed }
                if s.receiverHead < s.receivers.count {
                    let r = s.receivers[s.receiverHead]
                    s.receiverHead += 1
                    return .delivered(r)
                }
                if s.buffered < capacity { s.buffer.append(value); return .buffered }
                s.senders.append((value, k))
                return .wait
            }
            switch slow {
            case .delivered(let r): K.resume(r, with: value); K.resume(k, true)
            case .buffered: K.resume(k, true)
            case .closed: K.resume(k, false)
            case .wait: break
            }
        }
    }

    func receive() async -> T? {
        let fast: Fast = state.withLock { s in Self.take(&s) }
        switch fast {
        case .value(let v, let sender): if let sender { K.resume(sender, true) }; return v
        case .closed: return nil
        case .wait: break
        }
        return await K.suspendReceiver { (k: K.Receiver) in
            let now: Fast = state.withLock { s in
                let r = Self.take(&s)
                if case .wait = r { s.receivers.append(k) }
                return r
            }
            switch now {
            case .value(let v, let sender): if let sender { K.resume(sender, true) }; K.resume(k, with: v)
            case .closed: K.resume(k, with: nil)
            case .wait: break
            }
        }
    }

    private static func take(_ s: inout State) -> (Fast) {
        if s.head < s.buffer.count {
            let v = s.buffer[s.head]
            s.head += 1
            if s.head == s.buffer.count { s.buffer.removeAll(keepingCapacity: true); s.head = 0 }
            if s.senderHead < s.senders.count {
                let (sv, k) = s.senders[s.senderHead]
                s.senderHead += 1
                s.buffer.append(sv)
                return .value(v, k)
            }
            return .value(v, nil)
        }
        if s.senderHead < s.senders.count {
            let (sv, k) = s.senders[s.senderHead]
            s.senderHead += 1
            if s.senderHead == s.senders.count { s.senders.removeAll(keepingCapacity: true); s.senderHead = 0 }
            return .value(sv, k)
        }
        return s.closed ? .closed : .wait
    }
    private typealias Fast = PeerTake<T, K.Sender>

    func close() {
        let (receivers, senders): ([K.Receiver], [(T, K.Sender)]) = state.withLock { s in
            s.closed = true
            defer { s.receivers = []; s.senders = []; s.receiverHead = 0; s.senderHead = 0 }
            return (Array(s.receivers[s.receiverHead...]), Array(s.senders[s.senderHead...]))
        }
        for r in receivers { K.resume(r, with: nil) }
        for (_, k) in senders { K.resume(k, false) }
    }
}

enum SendFast<K: PeerContinuationKind> {
    case delivered(K.Receiver)
    case buffered
    case closed
    case wait
}

enum PeerTake<T, Sender> {
    case value(T, Sender?)
    case closed
    case wait
}

/// Which continuation the peer channel uses.
protocol PeerContinuationKind: Sendable {
    associatedtype Receiver: Sendable
    associatedtype Sender: Sendable
    static func suspendReceiver(_ body: (Receiver) -> Void) async -> Int?
    static func suspendSender(_ body: (Sender) -> Void) async -> Bool
    static func resume(_ k: Receiver, with value: Int?)
    static func resume(_ k: Sender, _ delivered: Bool)
}

enum UnsafeKind: PeerContinuationKind {
    typealias Receiver = UnsafeContinuation<Int?, Never>
    typealias Sender = UnsafeContinuation<Bool, Never>
    static func suspendReceiver(_ body: (Receiver) -> Void) async -> Int? { await withUnsafeContinuation(body) }
    static func suspendSender(_ body: (Sender) -> Void) async -> Bool { await withUnsafeContinuation(body) }
    static func resume(_ k: Receiver, with value: Int?) { k.resume(returning: value) }
    static func resume(_ k: Sender, _ delivered: Bool) { k.resume(returning: delivered) }
}

enum CheckedKind: PeerContinuationKind {
    typealias Receiver = CheckedContinuation<Int?, Never>
    typealias Sender = CheckedContinuation<Bool, Never>
    static func suspendReceiver(_ body: (Receiver) -> Void) async -> Int? { await withCheckedContinuation(body) }
    static func suspendSender(_ body: (Sender) -> Void) async -> Bool { await withCheckedContinuation(body) }
    static func resume(_ k: Receiver, with value: Int?) { k.resume(returning: value) }
    static func resume(_ k: Sender, _ delivered: Bool) { k.resume(returning: delivered) }
}
