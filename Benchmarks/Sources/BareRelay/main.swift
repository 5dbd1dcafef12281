import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOSSL

// The issue's reference point, rebuilt so the benchmark measures it in the same run as rc-relay: a bare
// Hummingbird + AsyncHTTPClient relay that does only the minimum for a webhook (read the body, check the Standard
// Webhooks HMAC, parse the version, one POST to messages:send with a fixed token, answer). No replay window, routing,
// retries, deduplication, spool, logs or metrics. Not a product (its signature comparison is not even constant-time):
// a yardstick.
//
// Usage: bare-relay <port> <emulator URL> <access token> <whsec_ secret> [<CA file>]
// With an https emulator URL, the CA file's certificates are trusted beside the system's (as rc-relay's fcm.caFile).
let arguments = CommandLine.arguments
guard arguments.count == 5 || arguments.count == 6, let port = Int(arguments[1]), arguments[4].hasPrefix("whsec_"),
    let keyBytes = Data(base64Encoded: String(arguments[4].dropFirst(6)))
else {
    FileHandle.standardError.write(Data("usage: bare-relay <port> <emulator URL> <token> <whsec_secret> [<CA file>]\n".utf8))
    exit(2)
}
let sendURL = arguments[2] + "/v1/projects/demo-project/messages:send"
let authorization = "Bearer " + arguments[3]
let key = SymmetricKey(data: keyBytes)
var clientConfiguration = HTTPClient.Configuration(
    connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64))
if arguments.count == 6 {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.additionalTrustRoots = [.file(arguments[5])]
    clientConfiguration.tlsConfiguration = tls
}
let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)

struct Version: Decodable { var versionNumber: String }

let router = Router()
router.get("/healthz") { _, _ in "ok" }
// The floor for refusing: a route that answers 401 and does nothing else (scripts/bench --flood).
router.post("/refuse") { _, _ -> Response in throw HTTPError(.unauthorized) }
router.post("/webhooks/remote-config") { request, _ -> Response in
    let body = try await request.body.collect(upTo: 1 << 20)
    guard let id = request.headers[HTTPField.Name("webhook-id")!],
        let timestamp = request.headers[HTTPField.Name("webhook-timestamp")!],
        let signature = request.headers[HTTPField.Name("webhook-signature")!]
    else { throw HTTPError(.unauthorized) }
    var signed = Data("\(id).\(timestamp).".utf8)
    signed.append(contentsOf: body.readableBytesView)
    let expected = Data(HMAC<SHA256>.authenticationCode(for: signed, using: key)).base64EncodedString()
    guard signature.split(separator: " ").contains(where: { $0 == "v1," + expected }) else { throw HTTPError(.unauthorized) }
    let version = try JSONDecoder().decode(Version.self, from: Data(body.readableBytesView))
    var outbound = HTTPClientRequest(url: sendURL)
    outbound.method = .POST
    outbound.headers.add(name: "Authorization", value: authorization)
    outbound.headers.add(name: "Content-Type", value: "application/json")
    outbound.body = .bytes(
        ByteBuffer(string: #"{"message":{"topic":"PUSH_RC","data":{"CONFIG_STATE":"STALE","CONFIG_VERSION":"\#(version.versionNumber)"}}}"#))
    let response = try await client.execute(outbound, timeout: .seconds(10))
    let answer = try await response.body.collect(upTo: 1 << 16)
    guard response.status == .ok else { throw HTTPError(.badGateway) }
    return Response(
        status: .ok, headers: [.contentType: "application/json"],
        body: .init(byteBuffer: answer))
}
let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
    onServerRunning: { channel in
        FileHandle.standardOutput.write(Data("bare-relay listening on http://127.0.0.1:\(channel.localAddress?.port ?? port)\n".utf8))
    })
try await app.runService()
