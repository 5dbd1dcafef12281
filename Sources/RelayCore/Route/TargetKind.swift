/// A kind of target a route can send to instead of an FCM topic or condition: an HTTP target (`webhook:`) today, APNs
/// direct or a queue tomorrow. A kind is its own files: its definition, read from the route's key and validated into a
/// ``RouteTarget``, which makes each version's ``TargetMessage``; RelayServer's `TargetKinds.all` lists the kinds a
/// relay knows (docs/development.md, "A third kind of target"), and nothing else names one.
public protocol TargetKind: Sendable {
    /// The route's key that holds its definition (`webhook`).
    var key: String { get }
    /// The keys its definition may hold, to refuse typos: "" for its own keys, a path below them for a nested one
    /// (`url`, `secrets[]`).
    var knownKeys: [String: Set<String>] { get }
    /// Reads its definition, the value under ``key``.
    func definition(from decoder: any Decoder) throws -> any TargetDefinition
}

/// A kind's definition as the configuration wrote it, before validation.
public protocol TargetDefinition: Sendable, Encodable {
    /// The route's key it was written under (its kind's ``TargetKind/key``).
    var key: String { get }
    /// The same definition with each secret it holds (a ``SecretSource`` given by the environment or a file) read by
    /// `read`. `read` is given the source and its key below the route (`webhook.url`, `webhook.secrets[0]`), and answers
    /// nil when it could not be read (having noted why).
    func readingSecrets(_ read: (SecretSource, String) -> String?) -> any TargetDefinition
    /// Validates it for the route named `route`; an error's key is below the route (`webhook.url`).
    func target(route: String) throws(RouteError) -> any RouteTarget
    func isEqual(to other: any TargetDefinition) -> Bool
}

extension TargetDefinition where Self: Equatable {
    public func isEqual(to other: any TargetDefinition) -> Bool { (other as? Self) == self }
}

/// A route's validated target: what it makes of each version, and how it is shown without its secrets.
public protocol RouteTarget: Sendable {
    /// Its kind's key (`webhook`): the audience's kind in the history, and the preview's `webhook:<route>`.
    var kind: String { get }
    /// How the console describes it, with no secret (`standard HTTP target at hooks.example.com`).
    var summary: String { get }
    /// Where its requests go, as `POST /admin/preview` may show it (an HTTP target's scheme and host only).
    var shownURL: String { get }
    /// The service its sends are counted and logged as (``MessageSender``'s `service`).
    var service: String { get }
    /// What it sends for a version of `project`: `change` is what the version changed, `audiences` the FCM audiences
    /// its other routes ping (`topic:NAME`).
    func message(for version: TemplateVersion, project: String, route: String, change: TemplateChange, audiences: [String]) -> any TargetMessage
}

/// One message a route's target sends for a version, which that route's sender encodes and sends.
public protocol TargetMessage: Sendable {
    /// Its target's kind (``RouteTarget/kind``): who it reaches is `<kind>:<route>`.
    var kind: String { get }
    /// The configured route whose target it goes to.
    var route: String { get }
    /// The request's body, which logs may show: a target's URL and secrets are its sender's, never here.
    var body: [UInt8] { get }
    /// What `POST /admin/preview` shows of it.
    var preview: any Encodable & Sendable { get }
    func isEqual(to other: any TargetMessage) -> Bool
}

extension TargetMessage where Self: Equatable {
    public func isEqual(to other: any TargetMessage) -> Bool { (other as? Self) == self }
}
