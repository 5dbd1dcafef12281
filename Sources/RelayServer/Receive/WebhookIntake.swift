import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore
import Tracing

/// An event that passed intake: read within the limit, its sender verified, its bytes decoded.
struct VerifiedEvent: Sendable {
    var event: RemoteConfigEvent
    /// The Standard Webhooks `webhook-id`, when signed.
    var webhookID: String?
    var logger: Logger
}

/// Receive and verify, before anything parses the body: the webhook's bytes are checked exactly as they arrived (an
/// HMAC over re-encoded JSON would prove nothing), and an unverified body is never parsed.
///
/// Order: draining → ID token and signature headers (headers only, before an unverified caller uploads anything) →
/// body within the limit → the signature over it → decode. ``IngestRoutes`` then hands the event to ``WebhookController``.
struct WebhookIntake: Sendable {
    enum Ingest: Sendable {
        case webhook
        case pubSub
    }

    let configuration: ConfigurationStore
    let drain: DrainState
    let metrics: RelayMetrics

    /// The verified, decoded event, or the refusal to answer with (counted and logged here).
    /// `stages`: when verification and decoding ended, for the request's spans.
    func verify(_ request: Request, ingest: Ingest, logger: Logger, stages: inout IntakeStages) async throws(Refusal) -> VerifiedEvent {
        var logger = logger
        do throws(Refusal) {
            return try await accept(request, ingest: ingest, logger: &logger, stages: &stages)
        } catch {
            metrics.webhook(source: ingest == .pubSub ? "pubsub" : "unknown", outcome: error.kind.rawValue)
            if error.kind == .notFound, ingest == .webhook {
                throw error.logged("webhook refused: webhooks are off (webhook.auth is none, poll-only mode)", to: logger)
            } else if error.kind == .notFound {
                throw error.logged("Pub/Sub push refused: oidc is not configured, so the endpoint does not exist", to: logger)
            }
            throw error.logged("webhook refused", to: logger)
        }
    }

    private func accept(_ request: Request, ingest: Ingest, logger: inout Logger, stages: inout IntakeStages) async throws(Refusal)
        -> VerifiedEvent
    {
        let headers = IntakeHeaders(request.headers)
        let configuration = configuration.current
        let settings = configuration.settings
        if ingest == .pubSub, configuration.idTokens == nil {
            // Credentials are checked first, as for every path that needs them: no token is 401 whatever is configured.
            guard headers.authorization != nil else { throw Refusal(kind: .invalidIDToken, detail: OIDCError.missingToken.description) }
            throw Refusal(kind: .notFound, detail: "Pub/Sub push is served only when oidc is configured")
        }
        if drain.isDraining {
            throw Refusal(
                kind: .notReady, detail: "rc-relay is stopping; retry, and another instance (or this one after its restart) will take it",
                retryAfter: 5)
        }
        let auth = settings.webhookAuth
        if ingest == .webhook, auth == .none {
            throw Refusal(kind: .notFound, detail: "webhooks are off: webhook.auth is none (poll-only mode)")
        }
        let idTokens = ingest == .pubSub || auth.needsOIDC ? configuration.idTokens : nil
        var provedByToken = false
        if let idTokens, ingest == .pubSub || auth != .any {
            let sender = try await verifyToken(headers.authorization, with: idTokens, logger: logger)
            logger[metadataKey: "sender"] = "\(sender)"
            provedByToken = true
        } else if let idTokens, headers.authorization != nil {
            // `any`: a valid ID token is enough; a request whose token fails may still be signed.
            do throws(Refusal) {
                let sender = try await verifyToken(headers.authorization, with: idTokens, logger: logger)
                logger[metadataKey: "sender"] = "\(sender)"
                provedByToken = true
            } catch {
                guard headers.webhookSignature != nil else { throw error }
            }
        }
        let signature = StandardWebhookVerifier.Headers(
            id: headers.webhookID, timestamp: headers.webhookTimestamp, signature: headers.webhookSignature)
        let signed: StandardWebhookVerifier.CheckedHeaders?
        do throws(VerificationError) {
            signed = ingest == .webhook && auth.needsHMAC && !(auth == .any && provedByToken) ? try settings.verifier.check(signature) : nil
        } catch {
            throw Self.refusal(error)
        }
        let bytes = try await read(request.body, declared: headers.contentLength.flatMap(Int.init), limit: settings.maxBodyBytes)
        if let signed {
            do throws(VerificationError) {
                try settings.verifier.verify(signed, body: bytes)
            } catch {
                throw Self.refusal(error)
            }
        }
        // The sender is proven: from here on the request is traced (its trace context read), refused or not.
        stages.verified = DefaultTracerClock.now
        // The id's form is checked once the sender is known, so an unsigned caller learns nothing of what is accepted.
        if let id = headers.webhookID {
            do throws(DecodeError) {
                try EventDecoder.checkID(id, name: "webhook-id")
            } catch {
                throw Refusal(kind: .malformedEvent, detail: "\(error)")
            }
        }
        do throws(DecodeError) {
            let event: RemoteConfigEvent
            switch ingest {
            case .webhook:
                let attributes = EventHeaders(
                    contentType: headers.contentType, id: headers.ceID, source: headers.ceSource,
                    specVersion: headers.ceSpecVersion, type: headers.ceType)
                event = try EventDecoder.decode(body: bytes, headers: attributes)
            case .pubSub:
                event = try PubSubDecoder.decode(body: bytes, contentType: headers.contentType)
            }
            stages.decoded = DefaultTracerClock.now
            return VerifiedEvent(event: event, webhookID: signature.id, logger: logger)
        } catch {
            throw Refusal(kind: Refusal.kind(of: error), detail: error.description)
        }
    }

    private static func refusal(_ error: VerificationError) -> Refusal {
        let stale = error == .timestampTooOld || error == .timestampInFuture
        return Refusal(kind: stale ? .timestampOutOfTolerance : .invalidSignature, detail: error.description)
    }

    /// The verified sender of a Google-signed ID token.
    private func verifyToken(_ authorization: String?, with idTokens: IDTokenVerifier, logger: Logger) async throws(Refusal) -> String {
        do throws(OIDCError) {
            return try await idTokens.verify(authorization: authorization)
        } catch {
            if case .keysUnavailable(let reason) = error {
                // The HTTP client's text stays in the log: it names hosts and addresses a caller has no need of.
                logger.warning("ID-token keys unavailable", metadata: ["reason": "\(reason)"])
                throw Refusal(
                    kind: .verificationUnavailable, detail: "the keys that sign ID tokens could not be fetched; retry later", retryAfter: 30)
            }
            throw Refusal(kind: .invalidIDToken, detail: error.description)
        }
    }

    /// Reads the body, refusing as soon as it passes the limit (a declared length is checked before reading).
    private func read(_ body: RequestBody, declared: Int?, limit: Int) async throws(Refusal) -> Data {
        // A function, not a value: the refusal's text is built only for a body that is refused.
        func tooLarge() -> Refusal { Refusal(kind: .bodyTooLarge, detail: "the body is larger than \(limit) bytes") }
        if let declared, declared > limit { throw tooLarge() }
        var data = Data()
        if let declared { data.reserveCapacity(declared) }
        do {
            for try await chunk in body {
                guard data.count + chunk.readableBytes <= limit else { throw tooLarge() }
                data.append(contentsOf: chunk.readableBytesView)
            }
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal(kind: .malformedEvent, detail: "the body could not be read")
        }
        return data
    }
}

extension HTTPField.Name {
    static let webhookID = Self("webhook-id")!
    static let webhookTimestamp = Self("webhook-timestamp")!
    static let webhookSignature = Self("webhook-signature")!
    static let ceID = Self("ce-id")!
    static let ceSource = Self("ce-source")!
    static let ceSpecVersion = Self("ce-specversion")!
    static let ceType = Self("ce-type")!
}
