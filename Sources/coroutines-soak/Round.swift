import Coroutines
import Synchronization

/// SplitMix64: a small seeded generator, so that a failing run can be repeated with its seed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// How a producer sends.
enum SendStyle {
    case send(Int)                  // `send` on one channel
    case trySendThenSend(Int)       // `trySend`, then `send` of the same value if it was refused
    case select([Int])              // a `select` with a send case per channel
}

/// How a consumer receives.
enum ReceiveStyle {
    case receive(Int)               // `receive` until closed and drained
    case iterate(Int)               // `for value in channel`
    case tryReceiveThenReceive(Int) // `tryReceive`, then `receive` if nothing was ready
    case select([Int], timeout: Duration?)  // a `select` with a receive case per open channel
}

/// Something a coroutine does to the round once it has made `after` operations: close a
/// channel, or cancel a coroutine of the round (which may be itself).
struct Disruption {
    enum Action {
        case close(channel: Int)
        case cancel(victim: Int)    // an index into `RoundShared.handles`
    }
    let action: Action
    let after: Int
}

/// What a round's coroutines share besides the channels and the ledger.
final class RoundShared: Sendable {
    /// Every coroutine of the round: producers, then consumers (backstops first). Set before
    /// any of them passes the start gate; guarded by its lock.
    let handles = Mutex<[Coroutine]>([])
    /// Channel operations completed (sends that returned normally, values received).
    let operations = Atomic<Int>(0)
}

/// How often the races happened over the whole run (printed, so that a run shows it exercised them).
final class SoakEvents: Sendable {
    let closes = Atomic<Int>(0)              // channels closed while traffic ran
    let cancels = Atomic<Int>(0)             // coroutines cancelled while traffic ran
    let sendsClosed = Atomic<Int>(0)         // sends that threw ChannelError.closed
    let sendsCancelled = Atomic<Int>(0)      // sends (or the start gate) that threw CancellationError
    let receivesCancelled = Atomic<Int>(0)   // consumers ended by cancellation
    let selectTimeouts = Atomic<Int>(0)      // receive selects whose timeout case ran
    let schedulersUsed = Atomic<Int>(0)      // bit i: a coroutine ran on the pool's scheduler i

    /// Records which of `pool`'s schedulers the calling coroutine runs on.
    func noteScheduler(in pool: SchedulerPool) {
        if let i = pool.schedulers.firstIndex(where: { $0 === CoroutineScheduler.current }) {
            schedulersUsed.bitwiseOr(1 << i, ordering: .relaxed)
        }
    }

    /// The run's counts (rare events: one atomic add each).
    static let shared = SoakEvents()
}

/// One round: new channels, producers and consumers on the pool, closes and cancellations
/// racing with the traffic, then every value checked (``RoundLedger``).
///
/// Termination: each channel has one *backstop* consumer that is never cancelled and receives
/// until the channel is closed and drained, so a producer blocked in `send` always gets
/// through or sees the channel closed. Once every producer has ended, the driver closes every
/// channel, which ends the consumers.
struct SoakRound {
    let number: Int
    let pool: SchedulerPool
    var rng: SplitMix

    /// Runs the round in the calling coroutine (the driver) and returns its ledger, checked by
    /// the caller. `observe` gets the round's channels and coroutines (for the leak check).
    func run(observe: ([AnyObject]) -> Void) throws -> (RoundLedger, operations: Int) {
        var rng = self.rng
        let channelCount = Int.random(in: 2...5, using: &rng)
        let capacities: [Channel<UInt64>.Capacity] = (0..<channelCount).map { i in
            // Always one rendezvous and one buffered channel; the rest at random.
            if i == 0 { return 0 }
            if i == 1 { return .bounded(Int.random(in: 1...64, using: &rng)) }
            return [0, 1, 4, 64, .unbounded].randomElement(using: &rng)!
        }
        let channels = capacities.map { Channel<UInt64>(capacity: $0) }
        let producerCount = Int.random(in: 2...12, using: &rng)
        let consumerCount = channelCount + Int.random(in: 1...8, using: &rng)   // backstops first
        let ledger = RoundLedger(round: number, producers: producerCount)
        let shared = RoundShared()
        let start = Promise<Void>()
        // Victims: producers and non-backstop consumers (handles are producers, then consumers).
        let victims = Array(0..<producerCount) + Array((producerCount + channelCount)..<(producerCount + consumerCount))

        func someChannels() -> [Int] {
            Array((0..<channelCount).shuffled(using: &rng).prefix(Int.random(in: 2...channelCount, using: &rng)))
        }
        func disruptions(_ quota: Int) -> [Disruption] {
            var out: [Disruption] = []
            if Int.random(in: 0..<4, using: &rng) == 0 {
                out.append(Disruption(action: .close(channel: Int.random(in: 0..<channelCount, using: &rng)),
                                      after: Int.random(in: 1...quota, using: &rng)))
            }
            if Int.random(in: 0..<2, using: &rng) == 0 {
                out.append(Disruption(action: .cancel(victim: victims.randomElement(using: &rng)!),
                                      after: Int.random(in: 1...quota, using: &rng)))
            }
            return out
        }
        let disrupt: @Sendable ([Disruption], Int) -> Void = { plan, count in
            for d in plan where d.after == count {
                switch d.action {
                case .close(let c):
                    if channels[c].close() { SoakEvents.shared.closes.add(1, ordering: .relaxed) }
                case .cancel(let v):
                    shared.handles.locked { $0[v] }.cancel()
                    SoakEvents.shared.cancels.add(1, ordering: .relaxed)
                }
            }
        }

        var launched: [Coroutine] = []
        for p in 0..<producerCount {
            let quota = Int.random(in: 1...8_000, using: &rng)
            let style: SendStyle = switch Int.random(in: 0..<3, using: &rng) {
            case 0: .send(Int.random(in: 0..<channelCount, using: &rng))
            case 1: .trySendThenSend(Int.random(in: 0..<channelCount, using: &rng))
            default: .select(someChannels())
            }
            let plan = disruptions(quota)
            let round = number
            launched.append(Coroutine.launch(on: pool) {
                var sent = 0
                defer {
                    ledger.producerEnded(p, delivered: sent)
                    shared.operations.add(sent, ordering: .relaxed)
                }
                do {
                    try start.await()
                    SoakEvents.shared.noteScheduler(in: pool)
                    while sent < quota {
                        let v = SoakValue.make(round: round, producer: p, sequence: sent)
                        switch style {
                        case .send(let c): try channels[c].send(v)
                        case .trySendThenSend(let c): if try !channels[c].trySend(v) { try channels[c].send(v) }
                        case .select(let cs): try select { (s: inout Select<Void>) in for c in cs { s.send(v, to: channels[c]) {} } }
                        }
                        sent += 1
                        disrupt(plan, sent)
                    }
                } catch ChannelError.closed {
                    SoakEvents.shared.sendsClosed.add(1, ordering: .relaxed)
                } catch is CancellationError {
                    SoakEvents.shared.sendsCancelled.add(1, ordering: .relaxed)
                } catch {
                    ledger.unexpectedError("producer \(p): \(error)")
                }
            })
        }
        for i in 0..<consumerCount {
            let isBackstop = i < channelCount
            let style: ReceiveStyle = switch isBackstop ? -1 : Int.random(in: 0..<4, using: &rng) {
            case -1: .receive(i)
            case 0: .receive(Int.random(in: 0..<channelCount, using: &rng))
            case 1: .iterate(Int.random(in: 0..<channelCount, using: &rng))
            case 2: .tryReceiveThenReceive(Int.random(in: 0..<channelCount, using: &rng))
            default: .select(someChannels(),
                             timeout: Bool.random(using: &rng) ? .microseconds(Int.random(in: 20...500, using: &rng)) : nil)
            }
            let plan = isBackstop ? [] : disruptions(4_000)
            launched.append(Coroutine.launch(on: pool) {
                var got: [UInt64] = []
                defer {
                    ledger.consumerEnded(received: got)
                    shared.operations.add(got.count, ordering: .relaxed)
                }
                func afterReceive() { disrupt(plan, got.count) }
                do {
                    try start.await()
                    SoakEvents.shared.noteScheduler(in: pool)
                    switch style {
                    case .receive(let c):
                        while true { got.append(try channels[c].receive()); afterReceive() }
                    case .iterate(let c):
                        for v in channels[c] { got.append(v); afterReceive() }
                    case .tryReceiveThenReceive(let c):
                        while true {
                            got.append(try channels[c].tryReceive() ?? channels[c].receive())
                            afterReceive()
                        }
                    case .select(let cs, let timeout):
                        var open = cs
                        while !open.isEmpty {
                            let outcome: (Int, UInt64?)? = try select { s in
                                for c in open { s.receive(from: channels[c]) { (c, $0) } }
                                if let timeout { s.timeout(after: timeout) { nil } }
                            }
                            switch outcome {
                            case nil: SoakEvents.shared.selectTimeouts.add(1, ordering: .relaxed)   // timed out
                            case (let c, nil)?: open.removeAll { $0 == c }       // closed and drained
                            case (_, let v?)?: got.append(v); afterReceive()
                            }
                        }
                    }
                } catch ChannelError.closed {
                } catch is CancellationError {
                    SoakEvents.shared.receivesCancelled.add(1, ordering: .relaxed)
                } catch {
                    ledger.unexpectedError("consumer \(i): \(error)")
                }
            })
        }
        shared.handles.locked { $0 = launched }
        _ = start.fulfill(())

        // Given every coroutine launched and released at once, when every producer has ended,
        // then closing every channel ends every consumer.
        for c in launched.prefix(producerCount) { try c.join() }
        for ch in channels { _ = ch.close() }
        for c in launched.dropFirst(producerCount) { try c.join() }
        shared.handles.locked { $0 = [] }   // the bodies hold `shared`: no cycle left behind
        // Values still buffered: there must be none (each backstop, never cancelled, received
        // until its channel was closed and empty). Counted as received, and as left over.
        var drained: [UInt64] = []
        for ch in channels {
            while let v = try? ch.tryReceive() { drained.append(v) }
        }
        ledger.drained(drained)
        observe(channels + launched)
        return (ledger, shared.operations.load(ordering: .relaxed) + drained.count)
    }
}
