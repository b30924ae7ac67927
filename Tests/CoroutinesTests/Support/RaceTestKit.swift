import Foundation
@testable import Coroutines

// Helpers of the tests that race two threads against each other (the stress suites).

private typealias Kit = CoroutineTestKit

/// Spins for a round-dependent number of iterations, so that two racing steps meet at varying
/// offsets (not a stand-in for synchronisation: every outcome of the race is accepted and checked).
@inline(never)
func jitter(_ n: Int) {
    var x = 0
    for i in 0..<(n % 64) * 16 { x &+= Kit.opaque(i) }
    _ = Kit.opaque(x)
}

/// Busy-waits about `microseconds` (the race window of a test, not a wait for an event).
func spin(microseconds: Int) {
    let end = ContinuousClock.now + .microseconds(microseconds)
    while ContinuousClock.now < end {}
}

/// Writes a pattern over a large part of the calling coroutine's stack.
@inline(never)
func scribble(_ seed: Int) {
    withUnsafeTemporaryAllocation(of: Int.self, capacity: 8192) { buffer in
        for i in buffer.indices { buffer[i] = seed &* 0x9E37_79B9 &+ i }
        _ = Kit.opaque(buffer[Kit.opaque(17)])
    }
}
