// swift-tools-version:6.2
import Foundation
import PackageDescription

/// rc-relay: Firebase Remote Config template updates in, FCM topic pings out.
///
/// The targets follow the path of one webhook: `RelayCore` verifies, decodes and routes (pure Swift, no HTTP);
/// `DeliveryEngine` deduplicates, sends, retries, spools and keeps the delivery history (no HTTP server, no
/// configuration); `RelayStore` keeps what several replicas share on PostgreSQL (optional, `store.postgres`); `FCMClient` gets access tokens and calls `messages:send`; `RelayServer` receives webhooks, reads
/// the configuration and wires it all together; `FCMEmulator` is an independent Google look-alike that only the
/// executable (its development profile and `rc-relay emulator`) and the tests link; `LoadChart` draws the fetch-load
/// chart of `rc-relay simulate` and the console.
/// `Tests/interop/test_architecture.py` holds the graph to this.
/// Our own targets build with warnings as errors (Swift 6 language mode already checks concurrency strictly).
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

/// Fuzz builds (`scripts/fuzz`) cannot run build-tool plugins: `--sanitize=fuzzer` links libFuzzer's `main` into the
/// OpenAPI generator too. They set RC_RELAY_PREGENERATED_OPENAPI and copy RelayServer's sources, with the sources a
/// normal build generated, to `.build-fuzz/RelayServer`, which is then compiled as they are; normal builds never see it.
let pregenerated = ProcessInfo.processInfo.environment["RC_RELAY_PREGENERATED_OPENAPI"] != nil

/// Sanitizer builds leave swift-otel, the span exporter, out: under `-sanitize=thread` (`scripts/sanitize`, which sets
/// RC_RELAY_WITHOUT_OTEL) or `-sanitize=fuzzer` (`scripts/fuzz`), Swift 6.3 refuses its batch processors ("sending
/// 'logger' risks causing data races"), which it compiles without a sanitizer. Those builds test nothing of the
/// exporter (the interop tests export real spans, on the debug build); `RelayTracing` then refuses to start one
/// (compiled without `RC_RELAY_OTEL`).
let withoutOTel = pregenerated || ProcessInfo.processInfo.environment["RC_RELAY_WITHOUT_OTEL"] != nil

let package = Package(
    name: "rc-relay",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "rc-relay", targets: ["rc-relay"]),
        .library(name: "RelayServer", targets: ["RelayServer"]),
        .library(name: "RelayCore", targets: ["RelayCore"]),
        .library(name: "FCMEmulator", targets: ["FCMEmulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        // Only the command-line provider's trait: the file is parsed by rc-relay itself (docs/development.md says why).
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: ["CommandLineArguments"]),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-openapi-generator.git", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.3.0"),
        // W3C Trace Context's parser, swift-otel's own: incoming headers are checked with it before the tracer sees them.
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context.git", from: "1.0.0"),
    ]
        // Traces over OTLP/HTTP only (`tracing.otlpEndpoint`): the gRPC trait would build gRPC Swift for nothing.
        + (withoutOTel ? [] : [.package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"])]),
    targets: [
        .target(
            name: "RelayCore",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        // The fetch-load chart of `rc-relay simulate` and the console: the model, round-number scales, one drawing on a
        // small canvas written as SVG or as PNG pixels (its own deflate and a generated bitmap font: docs/development.md
        // says why no package draws or encodes it). Pure Swift; nothing of the relay.
        .target(
            name: "LoadChart",
            swiftSettings: strict
        ),
        .target(
            name: "FCMClient",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "DeliveryEngine",
            dependencies: [
                "RelayCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "RelayStore",
            dependencies: [
                "DeliveryEngine",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "RelayServer",
            dependencies: [
                "RelayCore",
                "FCMClient",
                "DeliveryEngine",
                "RelayStore",
                "LoadChart",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ] + (withoutOTel ? [] : [.product(name: "OTel", package: "swift-otel")]),
            path: pregenerated ? ".build-fuzz/RelayServer" : "Sources/RelayServer",
            exclude: pregenerated ? ["openapi.yaml", "openapi-generator-config.yaml"] : [],
            swiftSettings: strict + (withoutOTel ? [] : [.define("RC_RELAY_OTEL")]),
            // Server types and routing are generated from Sources/RelayServer/openapi.yaml (a link to the root's).
            plugins: pregenerated ? [] : [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        .target(
            name: "FCMEmulator",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        // Test-only: `rc-relay serve` with bugs planted on purpose (RC_RELAY_PLANT), for the fault campaign's proof
        // that its checker catches each (docs/replicas.md). Not a product: `rc-relay` has no way to plant any.
        .executableTarget(
            name: "rc-relay-planted",
            dependencies: ["RelayServer", "DeliveryEngine", .product(name: "Logging", package: "swift-log")],
            path: "Tests/PlantedRelay",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "rc-relay",
            dependencies: [
                "RelayServer",
                "RelayCore",
                "LoadChart",
                "FCMEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RelayCoreTests",
            dependencies: ["RelayCore"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LoadChartTests",
            dependencies: ["LoadChart"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "DeliveryEngineTests",
            dependencies: [
                "DeliveryEngine",
                "RelayCore",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer",
                "RelayCore",
                "DeliveryEngine",
                "RelayStore",
                "FCMEmulator",
                "FCMClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: strict
        ),
    ]
)
