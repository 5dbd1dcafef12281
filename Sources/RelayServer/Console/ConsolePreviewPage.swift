import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// Previewing a version: its change, each route's decision, and the requests FCM would get.
extension ConsoleRoutes {
    static let updateTypes = ["INCREMENTAL_UPDATE", "FORCED_UPDATE", "ROLLBACK", "REMOTE_CONFIG_UPDATE_TYPE_UNSPECIFIED"]

    func preview(_ query: Parameters) async -> [String: Any] {
        let projects = configuration.current.projects.ids
        let project = query.get("project").flatMap { projects.contains($0) ? $0 : nil } ?? projects.first ?? ""
        let updateType = query.get("updateType").flatMap { Self.updateTypes.contains($0) ? $0 : nil } ?? Self.updateTypes[0]
        let versionText = query.get("version") ?? ""
        let sinceText = query.get("since") ?? ""
        let explain = query.get("explain") != nil
        var context: [String: Any] = [
            "projects": projects.map { ["id": $0, "selected": $0 == project] as [String: Any] },
            "updateTypes": Self.updateTypes.map { ["value": $0, "selected": $0 == updateType] as [String: Any] },
            "version": versionText, "since": sinceText, "explain": explain,
        ]
        guard !versionText.isEmpty else { return context }
        guard let number = Self.versionNumber(versionText), sinceText.isEmpty || Self.versionNumber(sinceText) != nil else {
            context["problem"] = "A version is a number of 1 to 19 digits, at most 9223372036854775807."
            return context
        }
        let ask = AdminBodyRoutes.PreviewAsk(
            project: project, version: TemplateVersion(versionNumber: number, updateType: updateType), event: nil,
            since: Self.versionNumber(sinceText), explain: explain)
        let preview: AdminController.Preview
        do throws(Refusal) {
            preview = try await admin.preview(ask)
        } catch {
            context["problem"] = error.detail
            return context
        }
        var result: [String: Any] = ["version": preview.versionNumber, "since": preview.change?.since ?? ""]
        if let change = preview.change {
            if change.known {
                result["hasParameters"] = !change.parameters.isEmpty
                result["parameters"] = change.parameters.map { parameter -> [String: Any] in
                    var kind = parameter.kind
                    if parameter.defaultChanged { kind += ", default changed" }
                    if parameter.valueTypeChanged { kind += ", value type changed" }
                    return ["name": parameter.name, "kind": kind, "conditions": parameter.conditions.joined(separator: ", ")]
                }
                result["hasConditions"] = !change.conditions.isEmpty
                result["conditions"] = change.conditions.map { ["name": $0.name, "kind": $0.kind] as [String: Any] }
                result["reordered"] = change.conditionsReordered
                result["nothing"] = change.parameters.isEmpty && change.conditions.isEmpty && !change.conditionsReordered
            } else {
                result["unknown"] = change.reason ?? "the template could not be read"
            }
        } else {
            result["notFetched"] = true
        }
        result["decisions"] = preview.routes.map {
            ["route": $0.route, "fires": $0.fires, "targets": $0.targets.joined(separator: ", "), "reason": $0.reason] as [String: Any]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        result["requests"] = preview.requests.map { request -> [String: Any] in
            ["route": request.route, "json": String(decoding: (try? encoder.encode(request.body)) ?? Data(), as: UTF8.self)]
        }
        context["result"] = result
        return context
    }

    static func versionNumber(_ text: String) -> Int64? {
        guard (1...19).contains(text.utf8.count), text.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Int64(text)
    }
}
