// swift-tools-version:6.2
import Foundation
import PackageDescription

/// A path dependency's identity is its folder's name (`rc-relay` in a usual clone, `main` in CI's).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

/// Micro-benchmarks of the per-webhook hot path, and the bare relay that `scripts/bench` measures rc-relay against,
/// kept out of the main package so the test build never pays for them.
/// Run: `scripts/bench --micro` (or `swift run -c release --package-path Benchmarks micro`).
let package = Package(
    name: "rc-relay-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/google/swift-benchmark.git", from: "0.1.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .executableTarget(
            name: "micro",
            dependencies: [
                .product(name: "RelayCore", package: root),
                .product(name: "Benchmark", package: "swift-benchmark"),
            ],
            path: "Sources/Micro"
        ),
        // The yardsticks scripts/bench measures rc-relay against in the same runs: what both share, the bare relay
        // (issue #7: the minimum) and the fair floor (issue #35: the minimum plus the guarantees any relay owes).
        .target(
            name: "Yardstick",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Sources/Yardstick"
        ),
        .executableTarget(
            name: "bare-relay",
            dependencies: [
                "Yardstick",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/BareRelay"
        ),
        .executableTarget(
            name: "fair-floor",
            dependencies: [
                "Yardstick",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Sources/FairFloor"
        ),
    ]
)
