// swift-tools-version:6.2
import Foundation
import PackageDescription

/// A path dependency's identity is its folder's name (`rc-relay` in a usual clone).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

/// libFuzzer targets for every decoder an unauthenticated or signed caller reaches, for what Remote Config answers,
/// and for the configuration file.
/// Each is an executable whose entry point is libFuzzer's (`LLVMFuzzerTestOneInput`), so it builds only with
/// `--sanitize=fuzzer`: `scripts/fuzz` builds and runs them (seed corpus in `Fuzz/Corpus/<target>`).
let package = Package(
    name: "rc-relay-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(name: "FuzzEvents", dependencies: [.product(name: "RelayCore", package: root)]),
        .executableTarget(name: "FuzzSignature", dependencies: [.product(name: "RelayCore", package: root)]),
        .executableTarget(name: "FuzzCondition", dependencies: [.product(name: "RelayCore", package: root)]),
        .executableTarget(name: "FuzzTemplate", dependencies: [.product(name: "RelayCore", package: root)]),
        .executableTarget(name: "FuzzIDToken", dependencies: [.product(name: "RelayServer", package: root)]),
        .executableTarget(name: "FuzzConfiguration", dependencies: [.product(name: "RelayServer", package: root)]),
    ]
)
