import Dispatch
import QueuePool
import Synchronization
import Testing
import CoroutinesTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("DispatchQueuePool")
struct DispatchQueuePoolTests {
    // MARK: - Initialization

    @Test("init returns nil for a queue count outside 1...32", arguments: [0, -1, 33, Int.min, Int.max])
    func initRejectsOutOfRangeCounts(queueCount: Int) {
        #expect(DispatchQueuePool(label: "test.rejected", queueCount: queueCount) == nil)
    }

    @Test("init creates exactly queueCount queues for counts 1 and 32", arguments: [1, 32])
    func initAcceptsBoundaryCounts(queueCount: Int) throws {
        let pool = try #require(DispatchQueuePool(label: "test.boundary", queueCount: queueCount))
        #expect(pool.queueCount == queueCount)
        #expect(pool.queues.count == queueCount)
    }

    @Test("init keeps the label and the QoS it was given")
    func initKeepsLabelAndQoS() throws {
        let pool = try #require(DispatchQueuePool(label: "test.kept", queueCount: 2, qos: .userInitiated))
        #expect(pool.label == "test.kept")
        #expect(pool.qos == .userInitiated)
    }

    @Test("init uses the default QoS class when none is given")
    func initDefaultsToDefaultQoS() throws {
        let pool = try #require(DispatchQueuePool(label: "test.default-qos", queueCount: 2))
        #expect(pool.qos == .default)
    }

    @Test("queue labels begin with the pool's label and are distinct")
    func queueLabelsArePrefixedAndDistinct() throws {
        let pool = try #require(DispatchQueuePool(label: "com.example.pool", queueCount: 5))
        let labels = pool.queues.map(\.label)

        for label in labels {
            #expect(label.hasPrefix("com.example.pool"), "label \(label) lacks the pool's prefix")
        }
        #expect(Set(labels).count == labels.count, "duplicate labels in \(labels)")
        #expect(labels == (0..<5).map { "com.example.pool.\($0)" })
    }

    @Test("queues are distinct objects", arguments: [2, 7, 32])
    func queuesAreDistinctObjects(queueCount: Int) throws {
        let pool = try #require(DispatchQueuePool(label: "test.distinct", queueCount: queueCount))
        #expect(Set(pool.queues.map(ObjectIdentifier.init)).count == queueCount)
    }

    @Test("every queue has the pool's QoS class", arguments: [
        DispatchQoS.QoSClass.background, .utility, .default, .userInitiated, .userInteractive,
    ])
    func queuesHaveThePoolsQoS(qos: DispatchQoS.QoSClass) throws {
        let pool = try #require(DispatchQueuePool(label: "test.qos", queueCount: 3, qos: qos))
        #expect(pool.qos == qos)
        for queue in pool.queues {
            #expect(
                queue.qos.qosClass == Self.effectiveQoS(qos),
                "queue \(queue.label) has \(queue.qos.qosClass), not \(Self.effectiveQoS(qos))"
            )
        }
    }

    /// The class libdispatch actually gives a queue created with `qos`.
    ///
    /// Without kernel QoS support (everywhere but Darwin), libdispatch lowers `.userInteractive`
    /// queues to `.userInitiated`.
    private static func effectiveQoS(_ qos: DispatchQoS.QoSClass) -> DispatchQoS.QoSClass {
        #if canImport(Darwin)
        qos
        #else
        qos == .userInteractive ? .userInitiated : qos
        #endif
    }

    // MARK: - Round robin

    @Test("next() returns the queues in order, repeated", arguments: [1, 3, 8])
    func nextIsRoundRobin(queueCount: Int) throws {
        // Given a fresh pool
        let pool = try #require(DispatchQueuePool(label: "test.round-robin", queueCount: queueCount))

        // When next() is called three times per queue
        let returned = (0..<3 * queueCount).map { _ in ObjectIdentifier(pool.next()) }

        // Then it walks the queues in order three times
        let expected = Array(repeating: pool.queues.map(ObjectIdentifier.init), count: 3).flatMap { $0 }
        #expect(returned == expected)
    }

    @Test("next() from many threads returns every queue exactly once per queueCount calls")
    func nextIsFairUnderContention() throws {
        // Given a pool of 8 queues and a tally per queue
        let queueCount = 8
        let callsPerQueue = 1_000
        let pool = try #require(DispatchQueuePool(label: "test.contended", queueCount: queueCount))
        let tally = Mutex<[ObjectIdentifier: Int]>([:])

        // When 8 * 1000 calls race on all cores
        DispatchQueue.concurrentPerform(iterations: queueCount * callsPerQueue) { _ in
            let queue = ObjectIdentifier(pool.next())
            tally.withLock { $0[queue, default: 0] += 1 }
        }

        // Then each queue was handed out exactly 1000 times, and nothing else was
        let counts = tally.withLock { $0 }
        #expect(Set(counts.keys) == Set(pool.queues.map(ObjectIdentifier.init)))
        for (index, queue) in pool.queues.enumerated() {
            #expect(counts[ObjectIdentifier(queue)] == callsPerQueue, "queue \(index) was returned \(counts[ObjectIdentifier(queue)] ?? 0) times")
        }
        // And the counter is back at the start of a round
        #expect(pool.next() === pool.queues[0])
    }

    // MARK: - Serial execution

    @Test("blocks submitted to one queue of the pool run one at a time, in order")
    func queuesAreSerial() throws {
        // Given one queue of a pool and an in-flight counter
        let pool = try #require(DispatchQueuePool(label: "test.serial", queueCount: 4, qos: .userInitiated))
        let queue = pool.next()
        let blockCount = 1_000
        let inFlight = Atomic<Int>(0)
        let maximumInFlight = Atomic<Int>(0)
        let order = Mutex<[Int]>([])
        let group = DispatchGroup()

        // When 1000 blocks are submitted asynchronously
        for index in 0..<blockCount {
            queue.async(group: group) {
                let running = inFlight.add(1, ordering: .sequentiallyConsistent).newValue
                maximumInFlight.max(running, ordering: .sequentiallyConsistent)
                // Stay in the block a little so an overlapping block would be seen.
                for _ in 0..<200 {
                    maximumInFlight.max(inFlight.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
                }
                order.withLock { $0.append(index) }
                inFlight.subtract(1, ordering: .sequentiallyConsistent)
            }
        }
        let result = group.wait(timeout: .now() + hangBoundInterval)

        // Then they all ran, never more than one at a time, in submission order
        try #require(result == .success, "the blocks did not finish within 30 seconds")
        #expect(maximumInFlight.load(ordering: .sequentiallyConsistent) == 1)
        #expect(order.withLock { $0 } == Array(0..<blockCount))
    }

    // MARK: - Shared pools

    @Test("default(for:) returns the same instance on every call")
    func defaultPoolIsShared() {
        let first = DispatchQueuePool.default(for: .utility)
        let second = DispatchQueuePool.default(for: .utility)
        #expect(first === second)
    }

    @Test("default(for:) returns the same instance when first asked from many threads at once")
    func defaultPoolIsCreatedOnce() {
        let seen = Mutex<Set<ObjectIdentifier>>([])
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            let pool = ObjectIdentifier(DispatchQueuePool.default(for: .userInteractive))
            seen.withLock { _ = $0.insert(pool) }
        }
        #expect(seen.withLock { $0.count } == 1)
    }

    @Test("default(for:) returns a different pool per QoS class, each with that class")
    func defaultPoolsDifferPerQoS() {
        let classes: [DispatchQoS.QoSClass] = [.background, .utility, .default, .userInitiated, .userInteractive, .unspecified]
        let pools = classes.map { DispatchQueuePool.default(for: $0) }

        #expect(Set(pools.map(ObjectIdentifier.init)).count == classes.count)
        #expect(pools.map(\.qos) == classes)
        let names = ["background", "utility", "default", "userInitiated", "userInteractive", "unspecified"]
        #expect(pools.map(\.label) == names.map { "com.swift-coroutines.queuepool.\($0)" })
    }

    @Test("default(for:) pools have one queue per usable processor, capped at 32")
    func defaultPoolSizeFollowsProcessorCount() {
        let expected = min(max(activeProcessorCount(), 1), 32)
        #expect(DispatchQueuePool.default(for: .utility).queueCount == expected)
        #expect(DispatchQueuePool.default(for: .background).queueCount == expected)
    }

    @Test("default(for:) pool queues carry the pool's QoS class")
    func defaultPoolQueuesHaveQoS() {
        let pool = DispatchQueuePool.default(for: .utility)
        for queue in pool.queues {
            #expect(queue.qos.qosClass == .utility)
            #expect(queue.label.hasPrefix("com.swift-coroutines.queuepool.utility"))
        }
    }

    @Test("queue(for:) returns queues of the shared pool for that QoS class")
    func queueForReturnsSharedPoolQueues() {
        let pool = DispatchQueuePool.default(for: .background)
        let members = Set(pool.queues.map(ObjectIdentifier.init))
        let others = Set(DispatchQueuePool.default(for: .userInitiated).queues.map(ObjectIdentifier.init))

        for _ in 0..<(2 * pool.queueCount) {
            let queue = DispatchQueuePool.queue(for: .background)
            #expect(members.contains(ObjectIdentifier(queue)))
            #expect(!others.contains(ObjectIdentifier(queue)))
            #expect(queue.qos.qosClass == .background)
        }
    }

    // MARK: - Processor count

    @Test("activeProcessorCount() is between 1 and 1024")
    func processorCountIsPlausible() {
        #expect((1...1_024).contains(activeProcessorCount()))
    }

    @Test("activeProcessorCount() does not exceed the configured processor count")
    func processorCountIsBoundedByConfiguredProcessors() throws {
        #if canImport(Glibc) || canImport(Darwin)
        let configured = sysconf(Int32(_SC_NPROCESSORS_CONF))
        try #require(configured > 0)
        #expect(activeProcessorCount() <= configured)
        #endif
    }
}
