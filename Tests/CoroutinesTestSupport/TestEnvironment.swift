import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which groups of tests run in this process: the switches that the ThreadSanitizer run turns off.
///
/// Each is on in a plain build and off in a build with ThreadSanitizer or AddressSanitizer
/// (`swift test --sanitize=thread`), unless its environment variable says otherwise (`1` on,
/// `0` off), so that a sanitizer run started by hand behaves as CI's (`.ci/run` sets both to 0).
public enum TestEnvironment {
    /// Whether a sanitizer's runtime is loaded (its initialiser is a symbol of the process).
    public static let isSanitized: Bool = {
        #if canImport(Darwin)
        let handle = UnsafeMutableRawPointer(bitPattern: -2)   // RTLD_DEFAULT
        #else
        let handle: UnsafeMutableRawPointer? = nil              // RTLD_DEFAULT
        #endif
        return dlsym(handle, "__tsan_init") != nil || dlsym(handle, "__asan_init") != nil
    }()

    /// Tests with a million coroutines or a thousand threads (`COROUTINES_HEAVY_TESTS`): under a
    /// sanitizer every fiber and thread also costs shadow memory and mappings.
    public static var heavyTestsEnabled: Bool { flag("COROUTINES_HEAVY_TESTS") }

    /// Tests that run part of themselves in a child process (``ChildProcess``,
    /// `COROUTINES_EXIT_TESTS`). Under ThreadSanitizer each child is an instrumented copy of the
    /// whole test binary, too slow and too hungry for mappings; and a run started by hand without
    /// the variable once stopped for over 30 minutes with three crashed children unreaped and
    /// their `swift-backtrace` processes still running (most likely symbolicating the
    /// instrumented binary; ``ChildProcess`` now turns the crash reporter off in its children).
    public static var exitTestsEnabled: Bool { flag("COROUTINES_EXIT_TESTS") }

    private static func flag(_ name: String) -> Bool {
        switch ProcessInfo.processInfo.environment[name] {
        case "0": return false
        case "1": return true
        default: return !isSanitized
        }
    }
}
