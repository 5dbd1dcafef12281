import AsyncHTTPClient
import DeliveryEngine
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import RelayCore

/// A route's HTTP target as the engine's ``MessageSender``: one POST of the call's body, signed by Standard Webhooks
/// for the `standard` format, its answer classified by HTTP's rules (``SendFailure/init(httpStatus:retryAfter:now:)``).
/// Its URL and secrets live here only: no log line, error or history entry shows them.
final class HTTPTargetSender: TargetSender {
    let route: String
    let target: HTTPTarget
    let client: HTTPClient
    let logger: Logger
    /// The wall clock: the signature's timestamp, and a `Retry-After` date.
    let now: @Sendable () -> Date
    /// Why the target is disabled (it answered `410 Gone`), until the configuration is reloaded.
    private let disabled = NIOLockedValueBox<String?>(nil)

    init(route: String, target: HTTPTarget, client: HTTPClient, logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        (self.route, self.target, self.client, self.logger, self.now) = (route, target, client, logger, now)
    }

    var service: String { target.format.service }
    var pace: (key: String, rate: Double)? { ("host:\(target.host)", target.messagesPerSecond) }
    /// The one error code of its own: a call not made because a `410` disabled the target.
    var errorCodes: Set<String> { ["TARGET_DISABLED"] }

    /// Whether a `410` disabled it, and when.
    var disabledReason: String? { disabled.withLockedValue { $0 } }

    /// The most of a refusal's body kept for its error message.
    static let errorBodyLimit = 512

    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        guard case .target(let message) = payload, let call = message as? HTTPCall else {
            throw SendFailure(.permanent, "route \(route)'s HTTP target sends its own calls only")
        }
        if let reason = disabledReason { throw SendFailure(.permanent, reason, errorCode: "TARGET_DISABLED") }
        // No dry run reaches a receiver: the call is built and signed, and no request leaves.
        if validateOnly { return "\(call.id) (dry run: not sent)" }
        if let reason = await beforeRequest() { throw .withheld(reason) }
        var request = HTTPClientRequest(url: target.url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "rc-relay")
        if target.format == .standard {
            let timestamp = String(Int64(now().timeIntervalSince1970))
            request.headers.add(name: "webhook-id", value: call.id)
            request.headers.add(name: "webhook-timestamp", value: timestamp)
            request.headers.add(
                name: "webhook-signature", value: Self.signature(id: call.id, timestamp: timestamp, body: call.body, secrets: target.secrets))
        }
        request.body = .bytes(ByteBuffer(bytes: call.body))
        // `webhook.timeoutSeconds` bounds the whole call: the status line and headers, then what is read of the body.
        let deadline = ContinuousClock.now + target.timeout
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .seconds(target.timeout.components.seconds))
        } catch {
            throw SendFailure(.transient, "\(target.host) could not be reached: \(Self.describe(error))")
        }
        let status = Int(response.status.code)
        // At most a few hundred bytes of the body, and only until the deadline: the status is the answer, so a `2xx`
        // whose body stalls is accepted, not retried; a refusal's body only gives its error message its words.
        let body = response.body
        let answer = await Self.until(deadline) { try await Self.collect(body, upTo: Self.errorBodyLimit) } ?? ByteBuffer()
        if (200...299).contains(status) { return call.id }
        var failure = SendFailure(
            httpStatus: status, host: target.host, answer: answer, retryAfter: response.headers.first(name: "Retry-After"), now: now())
        if status == 410 {
            let reason = "\(target.host) answered 410 Gone: route \(route)'s target is disabled until the configuration is reloaded"
            disabled.withLockedValue { $0 = reason }
            failure.description = reason
            logger.error("HTTP target disabled: it answered 410 Gone", metadata: ["route": "\(route)", "host": "\(target.host)"])
        }
        throw failure
    }

    /// Standard Webhooks: `v1,<base64 HMAC-SHA256 of id.timestamp.body>`, one per secret, space-separated.
    static func signature(id: String, timestamp: String, body: [UInt8], secrets: [WebhookSecret]) -> String {
        secrets.map { StandardWebhookVerifier.sign(id: id, timestamp: Int64(timestamp) ?? 0, body: Data(body), secret: $0) }.joined(separator: " ")
    }

    /// Reads a body up to `limit` bytes; the rest is never read (the connection is closed instead), so a receiver that
    /// answers without end costs nothing more.
    static func collect(_ body: HTTPClientResponse.Body, upTo limit: Int) async throws -> ByteBuffer {
        var kept = ByteBuffer()
        for try await var part in body {
            if let slice = part.readSlice(length: min(part.readableBytes, limit - kept.readableBytes)) { kept.writeImmutableBuffer(slice) }
            if kept.readableBytes >= limit { break }
        }
        return kept
    }

    /// What `work` gives by `deadline`, or nil: past it, or when it fails (its task is then cancelled, which ends the
    /// read and closes the connection).
    static func until<T: Sendable>(_ deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () async throws -> T) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { try? await work() }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// A transport error in a few words, without the URL (AsyncHTTPClient's errors do not hold it).
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError, error == .deadlineExceeded || error == .readTimeout { return "no answer in time" }
        return String(describing: error).prefix(300).description
    }
}

/// HTTP's retry rules for an HTTP target: a `5xx`, a `408` or a `429` may work later (transient, after its
/// `Retry-After` when it gives one); any other `4xx` never will (permanent), and a `410` also disables the target.
extension SendFailure {
    init(httpStatus status: Int, host: String, answer: ByteBuffer, retryAfter: String?, now: Date) {
        let kind: Kind =
            switch status {
            case 408, 429, 500...599: .transient
            default: .permanent
            }
        let text = String(decoding: answer.readableBytesView, as: UTF8.self).filter { !$0.isNewline }
        let said = text.isEmpty ? "" : ": " + text.prefix(200)
        self.init(
            kind, "\(host) answered \(status)\(said)", httpStatus: status,
            retryAfter: RetryPolicy.retryAfter(retryAfter, now: now))
    }
}
