import Coroutines
import Synchronization

/// A value that crosses the channels: unique in the whole run.
///
/// Bits 40…63: the round; 32…39: the producer within the round; 0…31: the producer's sequence
/// number. A producer's sequence number advances only when a send of it returned normally, so
/// the values a producer delivered are exactly its numbers `0..<delivered`.
enum SoakValue {
    static func make(round: Int, producer: Int, sequence: Int) -> UInt64 {
        UInt64(round) << 40 | UInt64(producer) << 32 | UInt64(sequence)
    }
    static func round(_ v: UInt64) -> Int { Int(v >> 40) }
    static func producer(_ v: UInt64) -> Int { Int((v >> 32) & 0xFF) }
    static func sequence(_ v: UInt64) -> Int { Int(v & 0xFFFF_FFFF) }
}

/// What one round's coroutines report, each once, as it ends, and the check of it.
///
/// Delivered, by the contract (<doc:ChannelsAndSelect>, <doc:Cancellation>): a `send`, a
/// `trySend` that returned true, or a `select` whose send case ran, handed its value to a receiver
/// or to the buffer. Values buffered when the channel closes stay receivable. A send that threw
/// (`ChannelError.closed`: the channel was or became closed; `CancellationError`: cancellation won
/// the race) delivered nothing, and no receiver may ever get its value. So, once every
/// coroutine of the round has ended and the channels have been drained:
/// - **lost**: a delivered value that nobody received;
/// - **duplicated**: a value received more than once;
/// - **phantom**: a value received that no send delivered (its send threw, or it was never sent,
///   or it belongs to another round).
/// - **left over**: a value still buffered once every consumer has ended: each channel's backstop
///   receives until the channel is closed *and* empty, so this is a receive that reported
///   `closed` with values still buffered, or a value buffered after the close was seen. The drain
///   counts it as received (it is not lost), and as left over.
/// Any other error thrown by a channel operation is **unexpected**. All five fail the soak.
final class RoundLedger: Sendable {
    struct Producer: Sendable {
        /// Sends that returned normally: values `0..<delivered`.
        var delivered = 0
    }

    struct Verdict {
        var delivered = 0, received = 0, lost = 0, duplicated = 0, phantom = 0, leftOver = 0
        var samples: [String] = []
        var isClean: Bool { lost == 0 && duplicated == 0 && phantom == 0 && leftOver == 0 }
    }

    let round: Int
    /// Guarded by its lock: each slot written once by its coroutine, as it ends. A producer
    /// cancelled before it started never writes: it delivered nothing.
    private let producers: Mutex<[Producer]>
    /// Guarded by its lock: what each consumer received, and the drain after the round.
    private let received = Mutex<[[UInt64]]>([])
    /// Guarded by its lock: values found buffered by the drain after the round.
    private let leftOver = Mutex<[UInt64]>([])
    /// Guarded by its lock: descriptions of unexpected errors.
    private let unexpected = Mutex<[String]>([])

    init(round: Int, producers: Int) {
        self.round = round
        self.producers = Mutex(Array(repeating: Producer(), count: producers))
    }

    func producerEnded(_ p: Int, delivered: Int) {
        producers.locked { $0[p].delivered = delivered }
    }

    func consumerEnded(received values: [UInt64]) {
        received.locked { $0.append(values) }
    }

    /// Records what the driver drained from the closed channels once every consumer had ended.
    func drained(_ values: [UInt64]) {
        received.locked { $0.append(values) }
        leftOver.locked { $0 += values }
    }

    func unexpectedError(_ what: String) {
        unexpected.locked { $0.append(what) }
    }

    var unexpectedErrors: [String] { unexpected.locked { $0 } }

    /// Counts lost, duplicated and phantom values. Call once every coroutine of the round has
    /// ended and the drain has been recorded. O(values).
    func check() -> Verdict {
        let delivered = producers.locked { $0.map(\.delivered) }
        let batches = received.locked { $0 }
        var seen = delivered.map { [UInt8](repeating: 0, count: $0) }
        var verdict = Verdict()
        verdict.delivered = delivered.reduce(0, +)
        for v in leftOver.locked({ $0 }) {
            verdict.leftOver += 1
            note(&verdict, "left over \(describe(v))")
        }
        for batch in batches {
            verdict.received += batch.count
            for v in batch {
                let p = SoakValue.producer(v), s = SoakValue.sequence(v)
                guard SoakValue.round(v) == round, p < seen.count, s < seen[p].count else {
                    verdict.phantom += 1
                    note(&verdict, "phantom \(describe(v))")
                    continue
                }
                if seen[p][s] == 1 {
                    verdict.duplicated += 1
                    note(&verdict, "duplicated \(describe(v))")
                }
                seen[p][s] = min(seen[p][s] + 1, 2)
            }
        }
        for (p, marks) in seen.enumerated() {
            for (s, mark) in marks.enumerated() where mark == 0 {
                verdict.lost += 1
                note(&verdict, "lost round \(round) producer \(p) #\(s)")
            }
        }
        return verdict
    }

    private func describe(_ v: UInt64) -> String {
        "round \(SoakValue.round(v)) producer \(SoakValue.producer(v)) #\(SoakValue.sequence(v))"
    }

    private func note(_ verdict: inout Verdict, _ line: String) {
        if verdict.samples.count < 10 { verdict.samples.append(line) }
    }
}
