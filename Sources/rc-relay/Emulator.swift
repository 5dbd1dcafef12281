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
    @Option(help: "Serve HTTPS (HTTP/2 by ALPN, as Google does) with this PEM certificate chain; needs --tls-key.")
    var tlsCert: String?
    @Option(help: "The PEM private key of --tls-cert.") var tlsKey: String?
    @Option(help: "With TLS: end each connection with GOAWAY once it is this many seconds old, as Google's front ends do.")
    var maxConnectionAge: Double?
    @Option(help: "Messages kept for GET /emulator/messages, the newest (the counts in /emulator/stats cover all).")
    var messagesKept = EmulatorState.defaultMessagesKept
    @Option(help: "Other projects every service account may send for (comma-separated), as a role granted on them allows.")
    var alsoSendsFor: String?

    func validate() throws {
        guard messagesKept >= 1 else { throw ValidationError("--messages-kept must be at least 1") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        if let age = maxConnectionAge {
            guard tlsCert != nil else { throw ValidationError("--max-connection-age needs --tls-cert (it ends HTTP/2 connections)") }
            guard age.isFinite, age > 0, age <= 86_400 else { throw ValidationError("--max-connection-age must be above 0 and at most 86400") }
        }
    }

    func run() async throws {
        var logger = Logger(label: "fcm-emulator")
        logger.logLevel = .notice
        let state = EmulatorState(
            tokenLifetime: tokenLifetime, baseLatencyMs: latencyMs, metadataProject: project, messagesKept: messagesKept)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let tls = tlsCert.map { EmulatorTLS(certificateFile: $0, keyFile: tlsKey ?? "") }
        await state.setMaxConnectionAge(maxConnectionAge.map { .milliseconds(Int64($0 * 1000)) })
        await state.grant(projects: Set((alsoSendsFor ?? "").split(separator: ",").map { String($0) }))
        let app = try FCMEmulatorServer.buildApplication(state: state, host: host, port: port, tls: tls, logger: logger) {
            continuation.yield($0)
        }
        let scheme = tls == nil ? "http" : "https"
        // With TLS the certificate names the host: `localhost` matches a certificate made for it.
        let shownHost = host == "0.0.0.0" ? "127.0.0.1" : (tls == nil ? host : "localhost")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService() }
            var iterator = ports.makeAsyncIterator()
            guard let bound = await iterator.next() else { return }
            let tokenURI = "\(scheme)://\(shownHost):\(bound)/token"
            if let existing = FileManager.default.contents(atPath: keyFile) {
                try await ServiceAccountFactory.trust(keyFile: existing, tokenURI: tokenURI, state: state)
            } else {
                try await ServiceAccountFactory.make(project: project, tokenURI: tokenURI, state: state)
                    .write(to: URL(fileURLWithPath: keyFile), options: .atomic)
            }
            FileHandle.standardOutput.write(Data("fcm-emulator listening on \(scheme)://\(shownHost):\(bound) (key file: \(keyFile))\n".utf8))
            try await group.waitForAll()
        }
    }
}
