import DeliveryEngine
import Foundation
import RelayCore

/// The generated API types, built from the relay's own records.
extension Components.Schemas.Attempt {
    init(_ attempt: DeliveryReport.Attempt) {
        self.init(at: attempt.at, httpStatus: attempt.httpStatus, errorCode: attempt.errorCode)
    }
}

extension Components.Schemas.DeliveryError {
    init(_ error: DeliveryReport.ErrorDetail) {
        self.init(httpStatus: error.httpStatus, errorCode: error.errorCode, message: error.message)
    }
}

extension Components.Schemas.DeliveryRecord {
    init(_ entry: DeliveryHistory.Entry) {
        let report = entry.report
        self.init(
            id: entry.id, project: entry.project, route: entry.route, versionNumber: String(entry.version.versionNumber),
            eventId: entry.eventID, origin: .init(rawValue: entry.origin.rawValue) ?? .webhook, retryOf: entry.retryOf,
            target: entry.toDevice ? "token" : nil, validateOnly: entry.validateOnly ? true : nil,
            status: report.flatMap { .init(rawValue: $0.status.rawValue) } ?? .pending, receivedAt: entry.receivedAt,
            settledAt: entry.settledAt, messageName: report?.messageName,
            error: report?.error.map(Components.Schemas.DeliveryError.init),
            attempts: (report?.attempts ?? []).map(Components.Schemas.Attempt.init), decision: entry.decision,
            waitingUntil: entry.waitingUntil, waitingFor: entry.waitingFor, shard: entry.shard?.index, shards: entry.shard?.count,
            traceId: entry.traceID, replica: entry.replica)
    }
}

extension Components.Schemas.RouteView {
    /// `disabled`: why its other target is disabled, if it is.
    init(_ route: Route, disabled: String? = nil) {
        let definition = route.definition
        var data: [String: String] = [:]
        for (key, value) in definition.data ?? [:] {
            if case .string(let text) = value { data[key] = text }
        }
        self.init(
            name: route.name, topic: definition.topic, condition: definition.condition, data: .init(additionalProperties: data),
            when: definition.when.map {
                .init(
                    updateTypes: $0.updateTypes, origins: $0.origins,
                    changed: $0.changed.map { .init(parameters: $0.parameters, conditions: $0.conditions) })
            },
            audience: definition.audience.map { .init(additionalProperties: $0) },
            android: definition.android.map { .init(priority: $0.priority, collapseKey: $0.collapseKey, ttlSeconds: $0.ttlSeconds) },
            apns: definition.apns.map { .init(collapseId: $0.collapseId) },
            webpush: definition.webpush.map { .init(ttlSeconds: $0.ttlSeconds, urgency: $0.urgency) },
            debounceSeconds: definition.debounceSeconds,
            waves: route.waves.map { .init(shards: $0.shards, spreadSeconds: $0.spreadSeconds, topic: $0.topicPattern) })
        if let target = route.destination { TargetKinds.kind(target.kind)?.describe(target, disabled: disabled, in: &self) }
    }
}

extension Components.Schemas.Schedules {
    init(_ schedules: Schedules) {
        self.init(
            quietPeriods: schedules.quietPeriods.map {
                .init(project: $0.project, route: $0.route, audience: $0.audience, versionNumber: String($0.version), until: $0.until)
            },
            waves: schedules.waves.map {
                .init(
                    project: $0.project, route: $0.route, versionNumber: String($0.version), shards: $0.shards, sent: $0.sent,
                    startedAt: $0.startedAt, nextSendAt: $0.nextSendAt)
            })
    }
}
