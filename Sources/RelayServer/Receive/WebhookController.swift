import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import RelayCore

/// `POST {webhookPath}` and `POST {pubsubPath}`: read → verify → decode → route → deliver → answer.
/// A refused request sends nothing.
struct WebhookController: Sendable {
    /// What the endpoint receives.
    enum Ingest: Sendable {
        /// CloudEvents (binary or structured) and bare template versions.
        case webhook
        /// Pub/Sub push envelopes (always with an ID token).
        case pubSub
    }

    let ingest: Ingest
    let auth: RelaySettings.WebhookAuth
    let verifier: StandardWebhookVerifier
    let idTokens: IDTokenVerifier?
    let maxBodyBytes: Int
    let deliveries: DeliveryService

    func handle(_ request: Request, context: RelayRequestContext) async -> Response {
        let requestID = request.headers[.requestID].flatMap { $0.isEmpty || $0.count > 128 ? nil : $0 } ?? context.id
        var logger = context.logger
        logger[metadataKey: "request_id"] = "\(requestID)"
        if let peer = context.remoteAddress?.ipAddress { logger[metadataKey: "peer"] = "\(peer)" }
        var response: Response
        do {
            response = try await relay(request, requestID: requestID, logger: &logger)
        } catch {
            if error.kind == .deliveryInProgress {
                logger.info("delivery continues; the sender is asked to retry and join it", metadata: ["status": "503"])
            } else {
                logger.notice("webhook refused", metadata: ["status": "\(error.kind.status.code)", "problem": "\(error.kind.rawValue)", "reason": "\(error.detail)"])
            }
            response = Problem(error.kind, detail: error.detail, requestID: requestID).response()
            if error.kind == .verificationUnavailable { response.headers[.retryAfter] = "30" }
            if error.kind == .deliveryInProgress { response.headers[.retryAfter] = "\(max(1, deliveries.answerWithin.components.seconds))" }
        }
        response.headers[.requestID] = requestID
        return response
    }

    private func relay(_ request: Request, requestID: String, logger: inout Logger) async throws(Refusal) -> Response {
        try await verifyIDToken(request, logger: &logger)  // headers only: before an unverified caller uploads anything
        let body = try await read(request)
        let signature = StandardWebhookVerifier.Headers(
            id: request.headers[.webhookID], timestamp: request.headers[.webhookTimestamp],
            signature: request.headers[.webhookSignature])
        try verifySignature(signature, body: body)
        let event = try decode(body, request)
        let projects = deliveries.projects
        let project = event.project ?? projects.defaultID
        guard projects[project] != nil else {
            throw Refusal(
                kind: .unknownProject,
                detail: "project '\(project)' is not configured; this relay sends for " + projects.ids.map { "'\($0)'" }.joined(separator: ", "))
        }
        let eventID = event.id ?? signature.id
        logger[metadataKey: "event_id"] = "\(eventID ?? "-")"
        logger[metadataKey: "project"] = "\(project)"
        logger[metadataKey: "version"] = "\(event.version.versionNumber)"
        logger.info("webhook accepted", metadata: ["format": "\(event.format.rawValue)"])
        // The same event by id, or the same version of the project by another way in, is one event.
        let keys = ["\(project)/version/\(event.version.versionNumber)", eventID.map { "\(project)/id/\($0)" }].compactMap { $0 }
        let record = SpoolRecord(
            keys: keys, project: project, eventID: eventID, format: event.format.rawValue, version: event.version,
            receivedAt: Date())
        let summary = WebhookAnswer.Event(
            id: eventID, format: event.format.rawValue, project: project,
            versionNumber: String(event.version.versionNumber), updateType: event.version.updateType)
        switch await deliveries.deliver(record, logger: logger) {
        case .settled(let reports, let duplicate):
            if duplicate { logger.info("duplicate event: answered from the first delivery, nothing sent again") }
            return WebhookAnswer.response(requestID: requestID, duplicate: duplicate, event: summary, reports: reports)
        case .pending:
            guard deliveries.recent.spool != nil else {
                throw Refusal(kind: .deliveryInProgress, detail: "the pings are still being delivered; retry to join the delivery under way")
            }
            do {
                try await deliveries.recent.spoolIfRunning(record)
            } catch {
                logger.error("the event could not be spooled", metadata: ["error": "\(error)"])
                throw Refusal(kind: .deliveryInProgress, detail: "the pings are still being delivered; retry to join the delivery under way")
            }
            logger.info("delivery continues in the background; the event is spooled")
            return WebhookAnswer.inProgress(requestID: requestID, event: summary)
        }
    }

    private func verifyIDToken(_ request: Request, logger: inout Logger) async throws(Refusal) {
        guard let idTokens else { return }
        do throws(OIDCError) {
            let sender = try await idTokens.verify(authorization: request.headers[.authorization])
            logger[metadataKey: "sender"] = "\(sender)"
        } catch {
            if case .keysUnavailable = error { throw Refusal(kind: .verificationUnavailable, detail: error.description) }
            throw Refusal(kind: .invalidIDToken, detail: error.description)
        }
    }

    private func verifySignature(_ signature: StandardWebhookVerifier.Headers, body: Data) throws(Refusal) {
        guard ingest == .webhook, auth.needsHMAC else { return }
        do throws(VerificationError) {
            try verifier.verify(signature, body: body)
        } catch {
            let stale = error == .timestampTooOld || error == .timestampInFuture
            throw Refusal(kind: stale ? .timestampOutOfTolerance : .invalidSignature, detail: error.description)
        }
    }

    /// Reads the body, refusing as soon as it passes the limit (a declared length is checked before reading).
    private func read(_ request: Request) async throws(Refusal) -> Data {
        let tooLarge = Refusal(kind: .bodyTooLarge, detail: "the body is larger than \(maxBodyBytes) bytes")
        if let length = request.headers[.contentLength].flatMap(Int.init), length > maxBodyBytes { throw tooLarge }
        do {
            let buffer = try await request.body.collect(upTo: maxBodyBytes)
            return Data(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw tooLarge
        } catch {
            throw Refusal(kind: .malformedEvent, detail: "the body could not be read")
        }
    }

    private func decode(_ body: Data, _ request: Request) throws(Refusal) -> RemoteConfigEvent {
        do throws(DecodeError) {
            switch ingest {
            case .webhook:
                let headers = EventHeaders(
                    contentType: request.headers[.contentType], id: request.headers[.ceID],
                    source: request.headers[.ceSource], specVersion: request.headers[.ceSpecVersion],
                    type: request.headers[.ceType])
                return try EventDecoder.decode(body: body, headers: headers)
            case .pubSub:
                return try PubSubDecoder.decode(body: body, contentType: request.headers[.contentType])
            }
        } catch {
            throw Refusal(kind: Refusal.kind(of: error), detail: error.description)
        }
    }
}

/// A refusal: the problem to answer with and the reason to log.
struct Refusal: Error {
    var kind: ProblemKind
    var detail: String

    static func kind(of error: DecodeError) -> ProblemKind {
        switch error {
        case .unsupportedContentType: .unsupportedMediaType
        case .unknownEventType: .unknownEventType
        case .malformedJSON, .missingVersionNumber, .invalidField, .missingAttribute, .unsupportedSpecVersion, .invalidSource,
            .invalidEnvelope:
            .malformedEvent
        }
    }
}

extension HTTPField.Name {
    static let requestID = Self("X-Request-Id")!
    static let webhookID = Self("webhook-id")!
    static let webhookTimestamp = Self("webhook-timestamp")!
    static let webhookSignature = Self("webhook-signature")!
    static let ceID = Self("ce-id")!
    static let ceSource = Self("ce-source")!
    static let ceSpecVersion = Self("ce-specversion")!
    static let ceType = Self("ce-type")!
}
