import DeliveryEngine
import Logging
import RelayCore

/// A kind of target as the server runs it: its core (``TargetKind``: key, definition, validation, message) and what
/// only a server has, its sender, its view in the admin API and the files it checks at load.
protocol ServedTargetKind: TargetKind {
    /// The sender of one route's target of this kind; `clients` hands out HTTP clients by CA file, kept across reloads.
    func sender(route: String, target: any RouteTarget, clients: HTTPTargetClients, logger: Logger) -> (any TargetSender)?
    /// Writes the target into `GET /admin/config`'s route view (the kind's own key of `RouteView` in `openapi.yaml`).
    func describe(_ target: any RouteTarget, disabled: String?, in view: inout Components.Schemas.RouteView)
    /// What the files a definition names hold wrong, each error's key below the route (`webhook.caFile`): checked at
    /// load, beside the route's validation, so a route's every problem is told at once.
    func problems(_ definition: any TargetDefinition) -> [RouteError]
}

/// A route target's sender: a ``MessageSender`` that can be disabled until the next reload.
protocol TargetSender: MessageSender {
    /// Why it sends nothing until the configuration is reloaded (an HTTP target's `410 Gone`), if it does not.
    var disabledReason: String? { get }
}

/// Every kind of target besides FCM's that a route can name. Adding a kind is its files and a line here: the
/// configuration's keys, the routes' validation, the senders, the admin API and the console read this list.
enum TargetKinds {
    static let all: [any ServedTargetKind] = [HTTPTargetKind()]

    /// The kind whose key is `key`.
    static func kind(_ key: String) -> (any ServedTargetKind)? { all.first { $0.key == key } }

    /// The kinds as a decoder's `userInfo` gives them to ``RouteDefinition``.
    static var userInfo: [CodingUserInfoKey: Any] { [RouteDefinition.targetKinds: all.map { $0 as any TargetKind }] }
}
