// swift-tools-version:6.0
// swift-coroutines — stackful coroutines for Swift. Licensed under the Apache License 2.0
// (see LICENSE).
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "swift-coroutines",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Coroutines", targets: ["Coroutines"]),
        .library(name: "QueuePool", targets: ["QueuePool"]),
        .library(name: "CoroutinesFoundation", targets: ["CoroutinesFoundation"]),
        .executable(name: "coroutines-demo", targets: ["coroutines-demo"]),
        .executable(name: "coroutines-echo", targets: ["coroutines-echo"]),
    ],
    targets: [
        .target(name: "CCoroutines"),
        .target(name: "QueuePool", swiftSettings: swiftSettings),
        .target(name: "Coroutines", dependencies: ["CCoroutines", "QueuePool"], swiftSettings: swiftSettings),
        .target(name: "CoroutinesFoundation", dependencies: ["Coroutines", "CCoroutines"], swiftSettings: swiftSettings),
        .executableTarget(name: "coroutines-demo", dependencies: ["Coroutines", "CoroutinesFoundation", "QueuePool"],
                          swiftSettings: swiftSettings),
        .executableTarget(name: "coroutines-echo", dependencies: ["CoroutinesFoundation"], swiftSettings: swiftSettings),
        // The soak run (Scripts/soak.sh): channels with close and cancel racing, every value
        // checked, leaks checked at the end; not a product.
        .executableTarget(name: "coroutines-soak", dependencies: ["Coroutines"], swiftSettings: swiftSettings),
        .executableTarget(name: "coroutines-bench", dependencies: ["Coroutines", "CoroutinesFoundation", "CCoroutines"],
                          swiftSettings: swiftSettings),
        // Test support shared by the test targets (child processes that hold no Swift concurrency
        // thread); not a product.
        .target(name: "CoroutinesTestSupport", path: "Tests/CoroutinesTestSupport", swiftSettings: swiftSettings),
        .testTarget(name: "CoroutinesTests", dependencies: ["Coroutines", "CCoroutines", "CoroutinesTestSupport"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "CoroutinesFoundationTests", dependencies: ["CoroutinesFoundation", "Coroutines", "CoroutinesTestSupport"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "QueuePoolTests", dependencies: ["QueuePool", "CoroutinesTestSupport"], swiftSettings: swiftSettings),
    ]
)
