import Foundation
import RelayCore

/// An event as the engine keeps it until its pings settle: in memory, and where one is configured in the spool or
/// the store (acknowledged before they settled).
package struct EventRecord: Codable, Sendable, Equatable {
    /// The event's identities: its project and version first (the file's name), then its ids.
    package var keys: [String]
    package var project: String
    package var eventID: String?
    package var format: String
    package var version: TemplateVersion
    package var receivedAt: Date
    /// The routes still to deliver; nil: every route the configuration has for the event.
    package var routes: [String]? = nil
    /// Pings accepted already while others of the event were due (waved shards `name@k`, and other routes): written
    /// as each is accepted, so a crash mid-wave, or a replica that takes the project over, does not ping them again.
    package var done: [String]? = nil
    /// A version Remote Config does not know, or far beyond the newest known one (docs/webhook.md, versions): relayed,
    /// but it moves no mark (what polling, waves and superseding compare against). Nil: an ordinary version.
    package var outlier: Bool? = nil
    /// The W3C `traceparent` of the request that brought the event, when tracing is on: a replay after a restart, or
    /// another replica's delivery, continues its trace.
    package var traceparent: String? = nil
    /// The event's row in a shared store, once admitted there: its progress and settlement address the row, never a
    /// key a later event may hold (not part of the record's JSON).
    package var storeRow: Int64? = nil

    private enum CodingKeys: String, CodingKey {
        case keys, project, eventID, format, version, receivedAt, routes, done, outlier, traceparent
    }

    package init(
        keys: [String], project: String, eventID: String?, format: String, version: TemplateVersion, receivedAt: Date, routes: [String]? = nil
    ) {
        (self.keys, self.project, self.eventID, self.format, self.version, self.receivedAt, self.routes) =
            (keys, project, eventID, format, version, receivedAt, routes)
    }

    /// The one place an event's keys are made, whoever brought it: the project's version first (what a kept event is
    /// named by, wherever it is kept), then the sender's event id within the project, then a signed request's
    /// `webhook-id`, its identity across projects. An event whose only id is its `webhook-id` has no per-project id
    /// key: that key would only match another way in's event that happened to carry the same id, and costs a row per
    /// event in the shared store (docs/performance.md).
    package static func keys(project: String, version: Int64, eventID: String? = nil, webhookID: String? = nil) -> [String] {
        [versionKey(project: project, version: version), eventID.map { "\(project)/id/\($0)" }, webhookID.map { webhookKeyPrefix + $0 }]
            .compactMap { $0 }
    }

    /// The key of a project's version: every way in that brings the version makes it, so they deduplicate.
    package static func versionKey(project: String, version: Int64) -> String { "\(project)/version/\(version)" }

    /// How a signed request's `webhook-id` key begins.
    package static let webhookKeyPrefix = "webhook/"

    /// What the event is, whatever way it came in: a second event that claims one of its ids must be this.
    package var fingerprint: String { "\(project)/\(version.versionNumber)" }

    /// Why a decoded record cannot be delivered, if it cannot.
    package var defect: String? {
        if keys.isEmpty { return "it has no keys" }
        if keys.contains(where: \.isEmpty) { return "it has an empty key" }
        if project.isEmpty { return "it names no project" }
        if let routes, routes.isEmpty { return "its route list is empty" }
        return nil
    }
}

/// What a spool found on start.
package struct SpoolRecovery: Sendable {
    /// The events to deliver.
    package var records: [EventRecord] = []
    /// Files that could not be read as an event, moved aside with the reason.
    package var quarantined: [(file: String, reason: String)] = []
    /// Temporary files of writes a crash interrupted, removed.
    package var temporaryFilesRemoved = 0

    package init(records: [EventRecord] = []) { self.records = records }
}

/// Where acknowledged events wait until delivered, so a crash or restart loses none.
package protocol Spool: Sendable {
    /// Writes the record durably (fsynced) before the sender is told 202.
    func write(_ record: EventRecord) throws
    func remove(_ record: EventRecord)
    /// The event's pings settled: a spool that answers duplicates keeps the reports, a file spool removes the file.
    func settle(_ record: EventRecord, reports: [DeliveryReport])
    /// Everything left from before, to deliver on start; never fails and never traps on what it finds.
    func recover() -> SpoolRecovery
}

extension Spool {
    package func settle(_ record: EventRecord, reports: [DeliveryReport]) { remove(record) }
}

package enum SpoolError: Error, CustomStringConvertible {
    case cannotWrite(String)
    case unreadable(String)
    package var description: String {
        switch self {
        case .cannotWrite(let what): "\(what) could not be written and synced"
        case .unreadable(let reason): reason
        }
    }
}
