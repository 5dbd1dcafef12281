import Foundation

/// Remote Config's template history, per project, as Google keeps it: each publish or rollback makes a new version
/// numbered one past the last; only the newest `kept` versions can be listed or fetched.
public actor TemplateStore {
    /// One version: its metadata (Remote Config's `Version`) and the template published with it.
    public struct Stored: Sendable {
        public var versionNumber: Int
        public var updateTime: Date
        public var updateType: String
        public var updateOrigin: String
        public var updateUser: String
        public var description: String
        public var rollbackSource: Int?
        /// The template's JSON object without `version` (conditions, parameters, parameterGroups).
        public var template: Data
    }

    /// Why a publish or a rollback was refused.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        case notAnObject
        case unknownVersion(Int)

        public var description: String {
            switch self {
            case .notAnObject: "a template is a JSON object with conditions, parameters and parameterGroups"
            case .unknownVersion(let number): "version \(number) is not among the versions kept"
            }
        }
    }

    /// Remote Config's `updateOrigin` values (its discovery document's enum).
    public static let origins = ["REMOTE_CONFIG_UPDATE_ORIGIN_UNSPECIFIED", "CONSOLE", "REST_API", "ADMIN_SDK_NODE"]

    /// How many versions a project keeps (Google keeps 300).
    public let kept: Int
    private var projects: [String: [Stored]] = [:]

    public init(kept: Int = 300) { self.kept = max(1, kept) }

    /// Publishes `template` (a JSON object; any `version` member in it is ignored) as the project's next version.
    @discardableResult
    public func publish(
        project: String, template: Data, description: String = "", origin: String = "REST_API", user: String = "emulator@example.com",
        forced: Bool = false, at time: Date = Date()
    ) throws(Refusal) -> Stored {
        guard var object = (try? JSONSerialization.jsonObject(with: template)) as? [String: Any] else { throw .notAnObject }
        object["version"] = nil
        object["etag"] = nil
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return append(
            project: project,
            Stored(
                versionNumber: 0, updateTime: time, updateType: forced ? "FORCED_UPDATE" : "INCREMENTAL_UPDATE", updateOrigin: origin,
                updateUser: user, description: description, template: body))
    }

    /// Makes version `number`'s template current again, as a new version of type `ROLLBACK`.
    @discardableResult
    public func rollback(project: String, to number: Int, at time: Date = Date()) throws(Refusal) -> Stored {
        guard let source = version(project: project, number: number) else { throw .unknownVersion(number) }
        return append(
            project: project,
            Stored(
                versionNumber: 0, updateTime: time, updateType: "ROLLBACK", updateOrigin: "REST_API", updateUser: source.updateUser,
                description: "Rollback to version \(number)", rollbackSource: number, template: source.template))
    }

    /// The versions kept, newest first.
    public func versions(project: String) -> [Stored] { (projects[project] ?? []).reversed() }

    /// The current version, if anything was ever published.
    public func current(project: String) -> Stored? { projects[project]?.last }

    /// Version `number`, while it is kept.
    public func version(project: String, number: Int) -> Stored? { projects[project]?.first { $0.versionNumber == number } }

    /// Forgets every project's history.
    public func reset() { projects = [:] }

    private func append(project: String, _ stored: Stored) -> Stored {
        var history = projects[project] ?? []
        var stored = stored
        stored.versionNumber = (history.last?.versionNumber ?? 0) + 1
        // Kept in milliseconds, the precision `updateTime` is written in: a time listed is then exactly a bound.
        stored.updateTime = Date(timeIntervalSince1970: (stored.updateTime.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        history.append(stored)
        if history.count > kept { history.removeFirst(history.count - kept) }
        projects[project] = history
        return stored
    }
}

extension TemplateStore.Stored {
    /// Remote Config's `Version` object, as `listVersions` and a template's `version` member show it (int64 as string).
    var versionObject: [String: Any] {
        var object: [String: Any] = [
            "versionNumber": String(versionNumber), "updateTime": Self.timestamp(updateTime),
            "updateType": updateType, "updateOrigin": updateOrigin, "updateUser": ["email": updateUser],
        ]
        if !description.isEmpty { object["description"] = description }
        if let rollbackSource { object["rollbackSource"] = String(rollbackSource) }
        return object
    }

    /// The template as `GET …/remoteConfig` answers it, with its `version`.
    var templateObject: [String: Any] {
        var object = (try? JSONSerialization.jsonObject(with: template)) as? [String: Any] ?? [:]
        object["version"] = versionObject
        return object
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The `ETag` Google sends with a template: it changes with every version.
    func etag(project: String) -> String { "etag-\(project)-\(versionNumber)" }
}
