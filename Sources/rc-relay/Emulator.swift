import ArgumentParser
import FCMEmulator
import Foundation
import Hummingbird
import Logging

/// `rc-relay emulator`: the FCM and OAuth look-alike as its own process.
struct Emulator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the FCM HTTP v1 and OAuth token emulator.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0: any free port, printed).") var port = 8081
    @Option(help: "Firebase project id for a generated key.") var project = "demo-project"
    @Option(help: "Service-account key file: trusted if it exists, otherwise generated and written here.")
    var keyFile = "emulator-service-account.json"
    @Option(help: "Lifetime of issued access tokens, in seconds.") var tokenLifetime = 3599
    @Option(help: "Latency added to every messages:send, in milliseconds.") var latencyMs = 0

    func run() async throws {
        var logger = Logger(label: "fcm-emulator")
        logger.logLevel = .notice
        let state = EmulatorState(tokenLifetime: tokenLifetime, baseLatencyMs: latencyMs, metadataProject: project)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = FCMEmulatorServer.buildApplication(state: state, host: host, port: port, logger: logger) { continuation.yield($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService() }
            var iterator = ports.makeAsyncIterator()
            guard let bound = await iterator.next() else { return }
            let tokenURI = "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(bound)/token"
            if let existing = FileManager.default.contents(atPath: keyFile) {
                try await ServiceAccountFactory.trust(keyFile: existing, tokenURI: tokenURI, state: state)
            } else {
                try await ServiceAccountFactory.make(project: project, tokenURI: tokenURI, state: state)
                    .write(to: URL(fileURLWithPath: keyFile), options: .atomic)
            }
            FileHandle.standardOutput.write(Data("fcm-emulator listening on http://\(host):\(bound) (key file: \(keyFile))\n".utf8))
            try await group.waitForAll()
        }
    }
}
