import Foundation
import Synchronization
import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias CK = ChannelTestKit

/// `Coroutine.produce`: see the Producers section of the ChannelsAndSelect article
/// (<doc:ChannelsAndSelect>).
@Suite("Coroutine.produce")
struct ProduceTests {
    @Test("the channel delivers the body's values in order and closes when the body returns")
    func closesWhenBodyEnds() async throws {
        let (values, after, closed) = try await Kit.run { () -> ([Int], String, Bool) in
            let ch: Channel<Int> = Coroutine.produce(capacity: 2) { out in
                for i in 0..<10 { try out.send(i) }
            }
            var values: [Int] = []
            for x in ch { values.append(x) }
            return (values, CK.result { try ch.receive() }, ch.isClosed)
        }
        #expect(values == Array(0..<10))
        #expect(after == "closed")
        #expect(closed)
    }

    @Test("the produced channel has the requested capacity", arguments: TestCapacity.allCases)
    func capacity(capacity: TestCapacity) async throws {
        let (cap, values) = try await Kit.run { () -> (Int, [Int]) in
            let ch: Channel<Int> = Coroutine.produce(capacity: capacity.capacity) { out in
                for i in 0..<3 { try out.send(i) }
            }
            var values: [Int] = []
            for x in ch { values.append(x) }
            return (ch.capacity, values)
        }
        #expect(cap == (capacity == .unbounded ? Int.max : capacity.room))
        #expect(values == [0, 1, 2])
    }

    @Test("with capacity 0, a send completes only when the consumer took the value")
    func rendezvousProducerIsPaced() async throws {
        let log = try await Kit.run { () -> [String] in
            let log = Kit.Log<String>()
            let ch: Channel<Int> = Coroutine.produce { out in
                for i in 0..<5 {
                    try out.send(i)
                    log.append("sent \(i)")
                }
            }
            for x in ch { log.append("consumed \(x)") }
            return log.all
        }
        // A completed send is never more than one value ahead of the consumer (the one it just
        // handed over, which the consumer logs when it runs next).
        var sent = 0, consumed = 0
        for entry in log {
            if entry.hasPrefix("sent") { sent += 1 } else { consumed += 1 }
            #expect(sent - consumed <= 1, "log \(log)")
        }
        #expect(sent == 5)
        #expect(consumed == 5)
    }

    @Test("an error thrown by the body closes the channel with that error, after the values sent")
    func errorClosesWithError() async throws {
        let log = try await Kit.run { () -> [String] in
            let ch: Channel<Int> = Coroutine.produce(capacity: 4) { out in
                try out.send(1)
                try out.send(2)
                throw CK.Failure(code: 8)
            }
            var log: [String] = []
            for _ in 0..<4 { log.append(CK.result { try ch.receive() }) }
            return log
        }
        #expect(log == ["1", "2", "failure 8", "failure 8"])
    }

    @Test("the body runs on the given scheduler")
    func onScheduler() async throws {
        try await Kit.withScheduler("produce-on") { s in
            let onIt = try await Kit.run { () -> [Bool] in
                let ch: Channel<Bool> = Coroutine.produce(on: s) { out in
                    try out.send(CoroutineScheduler.current === s)
                }
                return try [ch.receive()]
            }
            #expect(onIt == [true])
        }
    }

    @Test("the producer is a child of the launching coroutine: cancelling that coroutine ends the producer")
    func producerIsChild() async throws {
        let (ended, error) = try await Kit.run { () -> (Bool, String) in
            let producerEnded = Promise<String>()
            let producerBox = Kit.Box<Coroutine?>(nil)
            let parent = Coroutine.launch {
                let ch: Channel<Int> = Coroutine.produce { out in
                    producerBox.value = Coroutine.current
                    do {
                        var i = 0
                        while true { try out.send(i); i += 1 }
                    } catch {
                        producerEnded.fulfill(CK.label(error))
                        throw error
                    }
                }
                _ = try ch.receive()
                try Coroutine.delay(hangBound)
            }
            while producerBox.value == nil { try Coroutine.yield() }
            try CK.waitUntilSuspended(parent)
            parent.cancel()
            let how = try producerEnded.await()
            try parent.join()
            return (producerBox.value?.isCancelled ?? false, how)
        }
        #expect(ended)
        #expect(error == "cancelled")
    }
}

extension UnobservedErrorTests {
    /// Replaces the global unobserved-error handler, so it is nested in the serialized suite.
    @Suite("Coroutine.produce error reporting")
    struct ProduceReportingTests {
        @Test("a consumer-side close ends the producer at its next send, without an unobserved-error report")
        func consumerCloseEndsProducer() async throws {
            let producer = Kit.Box<Coroutine?>(nil)
            let reports = Kit.Log<String>()
            let otherReports = Kit.Log<String>()
            Coroutine.unobservedErrorHandler = { c, e in
                if c === producer.value { reports.append(CK.label(e)) } else { otherReports.append("\(c): \(e)") }
            }
            defer { Coroutine.unobservedErrorHandler = Coroutine.defaultUnobservedErrorHandler }
            let (received, producerError, sends) = try await Kit.run { () -> ([Int], String, Int) in
                let ended = Promise<String>()
                let sends = Kit.Counter()
                let ch: Channel<Int> = Coroutine.produce(capacity: 1) { out in
                    producer.value = Coroutine.current
                    do {
                        var i = 0
                        while true { try out.send(i); sends.increment(); i += 1 }
                    } catch {
                        ended.fulfill(CK.label(error))
                        throw error
                    }
                }
                let received = try (0..<3).map { _ in try ch.receive() }
                ch.close()
                let how = try ended.await()
                try Coroutine.yield()
                return (received, how, sends.value)
            }
            // Coroutine.run returns once its scheduler drained, including a report job.
            #expect(received == [0, 1, 2])
            #expect(producerError == "closed")
            #expect(sends <= 4)
            #expect(producer.value?.isFinished == true)
            #expect(reports.all.isEmpty)
        }

        @Test("control: a launch body that ends with ChannelError.closed from its own send is reported")
        func plainLaunchIsReported() async throws {
            // The same situation without produce: an un-joined launch whose send threw closed.
            let target = Kit.Box<Coroutine?>(nil)
            let reports = Kit.Log<String>()
            Coroutine.unobservedErrorHandler = { c, e in
                if c === target.value { reports.append(CK.label(e)) }
            }
            defer { Coroutine.unobservedErrorHandler = Coroutine.defaultUnobservedErrorHandler }
            try await Kit.run {
                let ch = Channel<Int>()
                ch.close()
                let c = Coroutine.launch { try ch.send(1) }
                target.value = c
            }
            #expect(reports.all == ["closed"])
        }
    }
}
