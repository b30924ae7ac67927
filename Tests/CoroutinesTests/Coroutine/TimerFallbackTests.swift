import CoroutinesTestSupport
import Foundation
import Testing
@testable import Coroutines

#if os(Linux)
/// The timer fallback for kernels without `epoll_pwait2` (a timerfd per polling thread, see
/// `poll.c`), forced with `COROUTINES_EPOLL_PWAIT2=0` in a child process: sub-millisecond delays and
/// select timeouts fire, never early and wake-ups from other threads still arrive. (Whether a stopped
/// scheduler's thread closes its timer descriptor is not tested: counting /proc/self/fd flaked in
/// CI, where other threads open descriptors lazily.) Only completion and lower bounds are
/// checked: how precise it is, `coroutines-bench timer-precision` measures.
@Suite("Timers without epoll_pwait2 (timerfd fallback)", .serialized, .enabled(if: TestEnvironment.exitTestsEnabled))
struct TimerFallbackTests {
    @Test("delays and select timeouts below a millisecond fire, never early, with the timerfd fallback")
    func subMillisecondTimersFire() async {
        await ChildProcess.run(.success, id: "subMillisecondTimersFire", environment: ["COROUTINES_EPOLL_PWAIT2": "0"]) {
            let s = CoroutineScheduler(name: "fallback")
            // Delays of 900, 300 and 600 µs each last at least as long as asked (never less:
            // a timer that fired early, or never, would show here)
            let all = [900, 300, 600].map { us in
                Coroutine.async(on: s) { () throws -> Bool in
                    let start = ContinuousClock.now
                    try Coroutine.delay(.microseconds(us))
                    return ContinuousClock.now - start >= .microseconds(us)
                }
            }
            for p in all { #expect(try await p.value) }
            // A select timeout of 200 µs on a channel that never delivers, 100 times
            let timeouts = try await Coroutine.async(on: s) { () throws -> Int in
                let never = Channel<Int>()
                var n = 0
                for _ in 0..<100 {
                    let timedOut = try select { c in
                        c.receive(from: never) { _ in false }
                        c.timeout(after: .microseconds(200)) { true }
                    }
                    if timedOut { n += 1 }
                }
                return n
            }.value
            #expect(timeouts == 100)
            // A wake-up from another thread while the loop waits on its timer
            let p = Promise<Int>()
            let waiter = Coroutine.async(on: s) { try p.await() }
            let delayed = Coroutine.async(on: s) { try Coroutine.delay(.microseconds(500_300)) }
            p.fulfill(5)
            #expect(try await waiter.value == 5)
            try await delayed.value
            s.stop()
        }
    }
}
#endif
