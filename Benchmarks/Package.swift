// swift-tools-version:6.2
import Foundation
import PackageDescription

/// A path dependency's identity is its folder's name (`rc-relay` in a usual clone, `main` in CI's).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

/// Micro-benchmarks of the per-webhook hot path, kept out of the main package so the test build never pays for them.
/// Run: `scripts/bench --micro` (or `swift run -c release --package-path Benchmarks micro`).
let package = Package(
    name: "rc-relay-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/google/swift-benchmark.git", from: "0.1.2"),
    ],
    targets: [
        .executableTarget(
            name: "micro",
            dependencies: [
                .product(name: "RelayCore", package: root),
                .product(name: "Benchmark", package: "swift-benchmark"),
            ],
            path: "Sources/Micro"
        )
    ]
)
