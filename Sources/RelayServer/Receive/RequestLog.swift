import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore
import Synchronization

/// What every handler and log line knows about the request: its id, the client, and a logger carrying both.
struct RequestInfo: Sendable {
    /// The caller's `X-Request-Id` (up to 128 visible characters), or one made here.
    var id: String
    /// The client's address: the peer's, or from `X-Forwarded-For` when the peer is a trusted proxy.
    var client: String?
    var logger: Logger
    /// The peer is one of `server.trustedProxies`: its `X-Forwarded-*` headers are believed.
    var viaTrustedProxy = false
    /// Which `X-Forwarded-*` entry, from the right, names the client (``TrustedProxies/resolve(peer:forwardedFor:)``).
    var forwardedHop = 0

    @TaskLocal static var current: RequestInfo?
}

/// The first middleware on every listener: settles the request id and client address, runs the request with them,
/// and writes one access line (`msg: request`) with method, path, status, client, peer and duration.
/// Errors that escape the routes (an unknown path, say) become problem+json here.
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext
    let configuration: ConfigurationStore
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let id = request.headers[.requestID].flatMap(Self.acceptable) ?? Self.makeID()
        let peer = context.remoteAddress?.ipAddress
        let trusted = configuration.current.settings.trustedProxies
        let (client, hop) = trusted.resolve(peer: peer, forwardedFor: request.headers[values: .xForwardedFor])
        var logger = logger
        logger[metadataKey: "request_id"] = .string(id)
        if let client { logger[metadataKey: "client"] = .string(client) }
        let info = RequestInfo(
            id: id, client: client, logger: logger, viaTrustedProxy: peer.map(trusted.trusts) ?? false, forwardedHop: hop)
        var response: Response
        do {
            response = try await RequestInfo.$current.withValue(info) { try await next(request, context) }
        } catch let error as HTTPError where error.status == .notFound {
            if let allowed = AllowedMethods.allowed(for: request.uri.path), !allowed.contains(request.method) {
                // A path that exists, asked with a method it does not take (RFC 9110: 405 with Allow).
                let names = allowed.map(\.rawValue).joined(separator: ", ")
                response = Problem(.methodNotAllowed, detail: "\(request.method) is not allowed on \(request.uri.path); use \(names)", requestID: id)
                    .response()
                response.headers[.allow] = names
            } else {
                response = Problem(.notFound, detail: "\(request.method) \(request.uri.path) is not served here", requestID: id).response()
            }
        } catch let error as HTTPError where (400..<500).contains(error.status.code) {
            let refusal = Refusal(kind: .invalidRequest, detail: "the request could not be read")
            _ = refusal.logged("request refused", to: logger, ["cause": "\(error.body ?? "")"])
            response = refusal.response(requestID: id)
        } catch {
            logger.error("request failed", metadata: ["error": "\(error)"])
            response = Problem(.internalError, detail: "the request could not be handled; the log has the details", requestID: id).response()
        }
        response.headers[.requestID] = id
        // A traced request's answer names its trace (``RequestSpan``): the access line does too.
        if Traces.isOn, let trace = Traces.traceID(traceparent: response.headers[.traceresponse]) {
            logger[metadataKey: "trace_id"] = .string(trace)
        }
        let elapsed = ContinuousClock.now - started
        // The access line's fields set on this request's own logger (its last line), not passed as a dictionary that
        // the line would sort and merge: the same line, for less of a webhook's CPU (issue #35).
        if logger.logLevel <= .info {
            logger[metadataKey: "method"] = "\(request.method)"
            logger[metadataKey: "path"] = .string(request.uri.path)
            logger[metadataKey: "status"] = "\(response.status.code)"
            logger[metadataKey: "peer"] = .string(peer ?? "-")
            logger[metadataKey: "duration_ms"] =
                "\(Double(elapsed.components.attoseconds / 1_000_000_000_000) / 1000 + Double(elapsed.components.seconds) * 1000)"
            logger.info("request")
        }
        return response
    }

    static func acceptable(_ id: String) -> String? {
        guard !id.isEmpty, id.utf8.count <= 128, id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return id
    }

    /// 32 hex digits, unique in this process and not guessable from the previous ones: a random seed drawn once, and
    /// a counter, through SplitMix64's finaliser (a bijection, so no two ids of a process are the same). Drawing 128
    /// random bits per request instead was two `getrandom` system calls, about 1 µs of each webhook (issue #35); an
    /// id is for finding lines, not a secret.
    static func makeID() -> String {
        let n = nextID.add(1, ordering: .relaxed).newValue
        // The n-th output of two SplitMix64 sequences, one per half.
        let (high, low) = (SplitMix64.finalise(seed.high &+ n &* SplitMix64.golden), SplitMix64.finalise(seed.low &+ n &* SplitMix64.golden))
        let hex = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 32) { buffer in
            for index in 0..<32 {
                let word = index < 16 ? high : low
                buffer[index] = hex[Int(truncatingIfNeeded: word >> (UInt64(15 - index % 16) * 4)) & 0xF]
            }
            return 32
        }
    }

    private static let seed: (high: UInt64, low: UInt64) = {
        var random = SystemRandomNumberGenerator()
        return (random.next(), random.next())
    }()
    private static let nextID = Atomic<UInt64>(0)
}

extension HTTPField.Name {
    static let requestID = Self("X-Request-Id")!
    static let xForwardedFor = Self("X-Forwarded-For")!
}
