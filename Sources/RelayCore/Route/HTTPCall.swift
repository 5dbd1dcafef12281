import Crypto
import Foundation

/// One call to a route's HTTP target: its body, already in the target's format, and the id that names it to the
/// receiver (`webhook-id`), the same on every retry and on every replica, so a receiver can drop a repeat.
public struct HTTPCall: Sendable, Equatable {
    /// The configured route whose target it goes to.
    public var route: String
    public var format: HTTPTarget.Format
    public var id: String
    /// What it describes; ``body`` is it in ``format``.
    public var notice: PublishNotice
    public var body: [UInt8]

    public init(route: String, format: HTTPTarget.Format, id: String, notice: PublishNotice) {
        (self.route, self.format, self.id, self.notice, self.body) = (route, format, id, notice, notice.body(format))
    }

    /// `msg_` and 32 hex digits of SHA-256 over the project, the version and the route: one per version and target.
    public static func id(project: String, version: Int64, route: String) -> String {
        let digest = SHA256.hash(data: Data("\(project)\u{0}\(version)\u{0}\(route)".utf8))
        return "msg_" + digest.prefix(16).map { String(format: "%02x", $0) }.joined()
    }
}

/// What a publish was, as an HTTP target's call describes it: the `data` of a standard target's event
/// (docs/targets.md, `openapi.yaml`'s `templateUpdated` webhook), and what a chat message says in words.
public struct PublishNotice: Sendable, Equatable, Codable {
    public struct User: Sendable, Equatable, Codable {
        public var name: String?
        public var email: String?
    }

    public var project: String
    public var versionNumber: String
    public var updateType: String?
    public var updateOrigin: String?
    public var updateUser: User?
    public var updateTime: String?
    public var description: String?
    /// For a rollback: the version rolled back to.
    public var rollbackSource: String?
    /// What the version changed, as `POST /admin/preview` shows it.
    public var change: ChangeSummary?
    /// The FCM audiences this version's routes ping (`topic:NAME`, `condition:EXPRESSION`), in route order.
    public var audiences: [String]
    /// The route that made this call.
    public var route: String

    public init(version: TemplateVersion, project: String, change: TemplateChange, audiences: [String], route: String) {
        self.project = project
        self.versionNumber = String(version.versionNumber)
        self.updateType = version.updateType
        self.updateOrigin = version.updateOrigin
        self.updateUser = version.updateUser.map { User(name: $0.name, email: $0.email) }
        self.updateTime = version.updateTime
        self.description = version.description
        self.rollbackSource = version.rollbackSource.map(String.init)
        self.change = ChangeSummary(change, of: version.versionNumber)
        self.audiences = audiences
        self.route = route
    }
}
