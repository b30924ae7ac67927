// coroutines-soak: channels (rendezvous, buffered, unbounded, and `select` over several) on a
// pool of 4 schedulers, with `close` and `cancel` racing the traffic, round after round; every
// value checked (nothing lost, duplicated or received that was not delivered), and the process
// checked for leaks at the end (descriptors, stacks, timers, coroutines, resident memory).
// Run it with `Scripts/soak.sh [seconds]`. Exit status 0: clean; 1: a loss, duplicate, phantom,
// unexpected error or leak; 2: bad arguments; 3: a round hung.
#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count <= 1, let seconds = arguments.first.map({ Int($0) }) ?? Soak.defaultSeconds, seconds > 0 else {
    say("usage: coroutines-soak [seconds]   (default \(Soak.defaultSeconds))")
    exit(2)
}
#if DEBUG
say("WARNING: coroutines-soak was built in debug mode; use Scripts/soak.sh (release).")
#endif
let seed = getenv("SOAK_SEED").flatMap { UInt64(String(decoding: UnsafeRawBufferPointer(start: $0, count: strlen($0)), as: UTF8.self)) }
exit(try Soak(seconds: seconds, isDefaultLength: arguments.isEmpty, seed: seed ?? .random(in: 0...UInt64.max)).run())
