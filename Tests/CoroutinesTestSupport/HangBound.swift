import Dispatch

/// How long a test waits for something that only the behaviour under test ends — a cancellation,
/// a stop, a close, a settlement, a report — before it calls that a hang. It stands for "never":
/// no passing run comes near it, whatever the machine's speed.
///
/// Why 300 s: Swift Testing runs the whole suite in parallel on two Swift concurrency threads
/// here, and under ThreadSanitizer a test's task has waited 20–30 s for a thread between two of
/// its own statements (a `delay(.seconds(30))` standing for "until the stop" then ended on its
/// own, and a 10 s guard beat a rejection that comes at once). A bound only detects a hang, and
/// the project's rule puts it at ten times the slowest normal wait or more.
public let hangBound: Duration = .seconds(300)

/// ``hangBound`` for Dispatch's timed waits (`DispatchSemaphore.wait(timeout:)` and the like).
public let hangBoundInterval: DispatchTimeInterval = .seconds(Int(hangBound.components.seconds))
