import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOSSL

/// What the two yardsticks share (the bare relay and the fair floor): their arguments, the Standard Webhooks check,
/// the version's parsing and the one `messages:send` request. Not a product: the signature comparison is not even
/// constant-time.
///
/// Usage: <name> <port> <emulator URL> <access token> <whsec_ secret> [<CA file>]
/// With an https emulator URL, the CA file's certificates are trusted beside the system's (as rc-relay's fcm.caFile).
public struct Yardstick: Sendable {
    public let port: Int
    public let sendURL: String
    public let authorization: String
    public let key: SymmetricKey
    public let caFile: String?
    /// The request body around the version: FCM's `message` object from `YARDSTICK_MESSAGE`, with `@VERSION@` where
    /// the version goes (`scripts/bench --same-message` passes the message rc-relay sends), or a minimal one.
    let bodyHead: String
    let bodyTail: String

    public init(name: String, arguments: [String] = CommandLine.arguments) {
        guard arguments.count == 5 || arguments.count == 6, let port = Int(arguments[1]), arguments[4].hasPrefix("whsec_"),
            let keyBytes = Data(base64Encoded: String(arguments[4].dropFirst(6)))
        else {
            FileHandle.standardError.write(Data("usage: \(name) <port> <emulator URL> <token> <whsec_secret> [<CA file>]\n".utf8))
            exit(2)
        }
        self.port = port
        sendURL = arguments[2] + "/v1/projects/demo-project/messages:send"
        authorization = "Bearer " + arguments[3]
        key = SymmetricKey(data: keyBytes)
        caFile = arguments.count == 6 ? arguments[5] : nil
        let message =
            ProcessInfo.processInfo.environment["YARDSTICK_MESSAGE"]
            ?? #"{"topic":"PUSH_RC","data":{"CONFIG_STATE":"STALE","CONFIG_VERSION":"@VERSION@"}}"#
        guard let marker = message.range(of: "@VERSION@") else {
            FileHandle.standardError.write(Data("\(name): YARDSTICK_MESSAGE has no @VERSION@\n".utf8))
            exit(2)
        }
        bodyHead = #"{"message":"# + message[..<marker.lowerBound]
        bodyTail = message[marker.upperBound...] + "}"
    }

    /// The client: 64 connections, and the CA file trusted when given. `timeout` is the client's own (the fair floor
    /// gives a read timeout; the bare relay none).
    public func client(timeout: HTTPClient.Configuration.Timeout = .init()) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            timeout: timeout, connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64))
        if let caFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.file(caFile)]
            configuration.tlsConfiguration = tls
        }
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    struct Version: Decodable { var versionNumber: String }

    /// The webhook's version number, once its Standard Webhooks signature checks out (no replay window).
    public func verifiedVersion(_ request: Request) async throws -> String {
        let body = try await request.body.collect(upTo: 1 << 20)
        guard let id = request.headers[HTTPField.Name("webhook-id")!],
            let timestamp = request.headers[HTTPField.Name("webhook-timestamp")!],
            let signature = request.headers[HTTPField.Name("webhook-signature")!]
        else { throw HTTPError(.unauthorized) }
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(contentsOf: body.readableBytesView)
        let expected = Data(HMAC<SHA256>.authenticationCode(for: signed, using: key)).base64EncodedString()
        guard signature.split(separator: " ").contains(where: { $0 == "v1," + expected }) else { throw HTTPError(.unauthorized) }
        return try JSONDecoder().decode(Version.self, from: Data(body.readableBytesView)).versionNumber
    }

    /// The one `messages:send` request for the version (the minimal message, or `YARDSTICK_MESSAGE`'s).
    public func send(_ version: String) -> HTTPClientRequest {
        var outbound = HTTPClientRequest(url: sendURL)
        outbound.method = .POST
        outbound.headers.add(name: "Authorization", value: authorization)
        outbound.headers.add(name: "Content-Type", value: "application/json")
        outbound.body = .bytes(ByteBuffer(string: bodyHead + version + bodyTail))
        return outbound
    }

    /// Says where it listens, on standard output.
    public func announce(_ name: String, port: Int?) {
        FileHandle.standardOutput.write(Data("\(name) listening on http://127.0.0.1:\(port ?? self.port)\n".utf8))
    }
}
