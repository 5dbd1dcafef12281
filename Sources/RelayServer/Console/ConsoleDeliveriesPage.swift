import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// The deliveries list (filtered) and one delivery's page.
extension ConsoleRoutes {
    static let statuses = ["", "pending", "accepted", "validated", "failed", "dead", "superseded", "interrupted"]

    /// The page's data, and whether the filter was refused (a control character: 400).
    func deliveries(_ query: Parameters, csrf: String) async -> ([String: Any], refused: Bool) {
        let status = query.get("status").flatMap { Self.statuses.contains($0) && !$0.isEmpty ? $0 : nil }
        let route = query.get("route").flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        let project = query.get("project").flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        var problem: String?
        var version: Int64?
        if let text = query.get("version"), !text.isEmpty {
            if text.utf8.count <= 19, text.utf8.allSatisfy({ (48...57).contains($0) }), let number = Int64(text) {
                version = number
            } else {
                problem = "A version is a number."
            }
        }
        var entries: [DeliveryHistory.Entry] = []
        var refused = false
        do throws(Refusal) {
            entries = try await admin.history(.init(status: status, route: route, project: project, version: version, limit: 200))
        } catch {
            problem = problem ?? error.detail
            refused = error.kind == .invalidRequest
        }
        let data: [String: Any] = [
            "statuses": Self.statuses.map { ["value": $0, "label": $0.isEmpty ? "any" : $0, "selected": $0 == (status ?? "")] as [String: Any] },
            "route": route ?? "", "project": project ?? "", "version": version.map(String.init) ?? "", "problem": problem ?? "",
            "count": entries.count,
            "rows": entries.map { entry -> [String: Any] in
                [
                    "id": entry.id, "when": Self.when(entry.receivedAt), "project": entry.project, "version": String(entry.version.versionNumber),
                    "route": entry.route, "status": Self.status(entry), "waiting": Self.waiting(entry), "attempts": entry.report?.attempts.count ?? 0,
                    "retryable": Self.retryable(entry), "csrf": csrf,
                ]
            },
        ]
        return (data, refused)
    }

    static func delivery(_ entry: DeliveryHistory.Entry, csrf: String) -> [String: Any] {
        let report = entry.report
        return [
            "id": entry.id, "project": entry.project, "route": entry.route, "version": String(entry.version.versionNumber),
            "status": status(entry), "origin": entry.origin.rawValue, "retryOf": entry.retryOf ?? "",
            "audience": entry.toDevice ? "one device" : (entry.audience?.key ?? "-"), "decision": entry.decision ?? "",
            "waiting": waiting(entry), "received": when(entry.receivedAt), "settled": entry.settledAt.map { when($0) } ?? "",
            "messageName": report?.messageName ?? "", "error": report?.error.map { "\($0.errorCode ?? "-") \($0.message)" } ?? "",
            "retryable": retryable(entry), "csrf": csrf, "traceId": entry.traceID ?? "",
            "attempts": (report?.attempts ?? []).enumerated().map { index, attempt -> [String: Any] in
                [
                    "number": index + 1, "at": when(attempt.at), "httpStatus": attempt.httpStatus.map(String.init) ?? "no answer",
                    "errorCode": attempt.errorCode ?? "-",
                ]
            },
        ]
    }
}
