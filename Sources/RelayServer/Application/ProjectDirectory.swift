import DeliveryEngine
import FCMClient
import RelayCore

/// The projects this relay serves, by id: each with its routes and how its pings are sent.
struct ProjectDirectory: Sendable {
    struct Pipeline: Sendable {
        var routes: RouteTable
        /// The sender with the project's credentials, and the retry rules.
        var send: SendPlan
        /// The project's access tokens (readiness asks it).
        var tokenSource: CachingTokenSource
        /// Where its credentials come from, for the admin API: `keyFile` or `metadataServer`, and the path or URL.
        var credentials: (kind: String, source: String)
        /// Remote Config's API with the project's credentials (catch-up polling).
        var remoteConfig: RemoteConfigClient

        /// What delivering `version` means for this project, knowing what it changed: a ping per matching route (or
        /// per part of a route's narrowed audience).
        func plan(for version: TemplateVersion, project: String, change: TemplateChange) -> DeliveryPlan {
            DeliveryPlan(pings: routes.pings(for: version, project: project, change: change), send: send)
        }
    }

    /// Events that name no project (bare versions, `projects/_`) go to the first project configured.
    let defaultID: String
    let ids: [String]
    private let pipelines: [String: Pipeline]

    init(_ entries: [(String, Pipeline)]) {
        self.defaultID = entries[0].0
        self.ids = entries.map(\.0)
        self.pipelines = Dictionary(entries, uniquingKeysWith: { first, _ in first })
    }

    subscript(id: String) -> Pipeline? { pipelines[id] }
}
