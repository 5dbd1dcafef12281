import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL

/// How the emulator serves TLS, as Google's front ends do: HTTP/2 by ALPN (HTTP/1.1 for a client that does not offer
/// it). Ending long-lived connections with `GOAWAY` is ``EmulatorState/maxConnectionAge``.
public struct EmulatorTLS: Sendable {
    /// PEM files: the server's certificate chain and its private key.
    public var certificateFile: String
    public var keyFile: String

    public init(certificateFile: String, keyFile: String) {
        (self.certificateFile, self.keyFile) = (certificateFile, keyFile)
    }

    func server() throws -> HTTPServerBuilder {
        let chain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { NIOSSLCertificateSource.certificate($0) }
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem)))
        return HTTPServerBuilder { responder in
            GuardedHTTP2Channel(
                inner: try HTTP2UpgradeChannel(tlsConfiguration: tls, configuration: HTTP2ChannelConfiguration(), responder: responder))
        }
    }
}

/// The emulator as a Hummingbird application: Google's two endpoints plus `/emulator/…` controls for tests.
public enum FCMEmulatorServer {
    /// Builds the application; `onServerRunning` receives the bound port (useful with port 0). With `tls`, it serves
    /// HTTPS with HTTP/2, as Google does; without, plaintext HTTP/1.1.
    public static func buildApplication(
        state: EmulatorState, host: String = "127.0.0.1", port: Int = 0, tls: EmulatorTLS? = nil, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        // FCM's discovery document (66 KB of JSON) is read now, before the emulator listens, not at the first send:
        // the benchmark's start figure is the relay's, and FCM has no such first-send cost.
        _ = DiscoveryDocument.fcm
        let router = Router(context: EmulatorContext.self)
        let token = TokenEndpoint(state: state)
        let send = SendEndpoint(state: state)
        router.post("/token") { request, _ in try await token.handle(request) }
        router.get("/tokeninfo") { request, _ in await token.info(request) }
        router.post("/v1/projects/:project/messages:send") { request, context in
            try await send.handle(request, context: context, project: try context.parameters.require("project"))
        }
        addRemoteConfig(to: router, state: state)
        addMetadataServer(to: router, state: state)
        addControls(to: router, state: state)
        return Application(
            router: router, server: try tls?.server() ?? .http1(),
            configuration: .init(address: .hostname(host, port: port), serverName: "fcm-emulator"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }

    /// The metadata server of Cloud Run and GCE: the default service account's token, and the project id.
    /// Like Google's, it answers only requests with `Metadata-Flavor: Google`.
    static func addMetadataServer(to router: Router<EmulatorContext>, state: EmulatorState) {
        let missingFlavor = Response(
            status: .forbidden, headers: [.contentType: "text/html"],
            body: .init(byteBuffer: ByteBuffer(string: "Missing Metadata-Flavor:Google header.")))
        router.get("/computeMetadata/v1/instance/service-accounts/default/token") { request, _ in
            guard request.headers[.init("Metadata-Flavor")!] == "Google" else { return missingFlavor }
            await state.noteTokenRequest(assertion: nil)
            // `?scopes=a,b` as Cloud Run's metadata server takes it; without, the default cloud-platform scope.
            let asked = request.uri.queryParameters["scopes"].map { $0.split(separator: ",").map(String.init) } ?? []
            let scopes = asked.isEmpty ? ["https://www.googleapis.com/auth/cloud-platform"] : Set(asked)
            guard let (token, lifetime) = await state.issueToken(project: state.metadataProject, scopes: scopes) else {
                return GoogleErrors.oauth("invalid_scope", "None of the scopes asked for is among this instance's access scopes.")
            }
            return GoogleErrors.json(TokenEndpoint.answer(token: token, lifetime: lifetime))
        }
        // The instance's access scopes, one a line (every scope when the emulator was not told to limit them).
        router.get("/computeMetadata/v1/instance/service-accounts/default/scopes") { request, _ in
            guard request.headers[.init("Metadata-Flavor")!] == "Google" else { return missingFlavor }
            let scopes = await state.grantableScopes ?? ["https://www.googleapis.com/auth/cloud-platform"]
            return Response(
                status: .ok, headers: [.contentType: "application/text"],
                body: .init(byteBuffer: ByteBuffer(string: scopes.sorted().joined(separator: "\n") + "\n")))
        }
        router.get("/computeMetadata/v1/project/project-id") { request, _ in
            guard request.headers[.init("Metadata-Flavor")!] == "Google" else { return missingFlavor }
            return Response(
                status: .ok, headers: [.contentType: "application/text"], body: .init(byteBuffer: ByteBuffer(string: state.metadataProject)))
        }
    }

    /// `/emulator/…`: what was recorded, and faults to inject.
    static func addControls(to router: Router<EmulatorContext>, state: EmulatorState) {
        let controls = router.group("emulator")
        controls.get("messages") { _, _ in
            // Each message is shown as the JSON object FCM received.
            let messages = await state.messages.map { recorded -> [String: Any] in
                [
                    "name": recorded.name, "project": recorded.project,
                    // Milliseconds: a fault campaign orders pings that are moments apart (Tests/interop/campaign.py).
                    "receivedAt": recorded.receivedAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
                    "message": (try? JSONSerialization.jsonObject(with: Data(recorded.message.utf8))) ?? [:],
                ]
            }
            return GoogleErrors.json(messages)
        }
        controls.delete("messages") { _, _ in
            await state.reset()
            await state.templates.reset()
            return Response(status: .noContent)
        }
        controls.get("stats") { _, _ in
            GoogleErrors.json(try JSONSerialization.jsonObject(with: try encoder.encode(await state.stats)))
        }
        controls.get("assertions") { _, _ in GoogleErrors.json(await state.assertions) }
        controls.post("faults") { request, context in
            let fault = try await request.decode(as: EmulatorState.Fault.self, context: context)
            await state.inject(fault)
            return Response(status: .noContent)
        }
        controls.post("tokens/unregistered") { request, context in
            struct Tokens: Decodable { var tokens: [String] }
            await state.unregister(try await request.decode(as: Tokens.self, context: context).tokens)
            return Response(status: .noContent)
        }
        controls.post("scopes") { request, context in
            struct Scopes: Decodable { var scopes: [String]? }
            await state.limitScopes(to: try await request.decode(as: Scopes.self, context: context).scopes.map(Set.init))
            return Response(status: .noContent)
        }
        controls.post("tokens/expire") { _, _ in
            await state.expireAllTokens()
            return Response(status: .noContent)
        }
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()
}

/// The emulator's request context keeps the connection, so a fault can drop it.
public struct EmulatorContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}
