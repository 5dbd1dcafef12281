import FCMClient
import Logging
import RelayCore

/// HTTP targets as the server runs them: an ``HTTPTargetSender`` per route, the admin API's `webhook` view, and the
/// CA file checked at load.
extension HTTPTargetKind: ServedTargetKind {
    func sender(route: String, target: any RouteTarget, clients: HTTPTargetClients, logger: Logger) -> (any TargetSender)? {
        guard let target = target as? HTTPTarget else { return nil }
        return HTTPTargetSender(route: route, target: target, client: clients.client(caFile: target.caFile), logger: logger)
    }

    func describe(_ target: any RouteTarget, disabled: String?, in view: inout Components.Schemas.RouteView) {
        guard let target = target as? HTTPTarget else { return }
        view.webhook = .init(
            format: .init(rawValue: target.format.rawValue) ?? .standard, host: target.host, secrets: target.secrets.count,
            caFile: target.caFile, timeoutSeconds: Int(target.timeout.components.seconds), messagesPerSecond: target.messagesPerSecond,
            disabled: disabled)
    }

    func problems(_ definition: any TargetDefinition) -> [RouteError] {
        guard let caFile = (definition as? RouteDefinition.Webhook)?.caFile, !caFile.isEmpty,
            BoundedFile.text(caFile)?.contains("-----BEGIN CERTIFICATE-----") != true
        else {
            return []
        }
        return [
            RouteError(
                key: "webhook.caFile", problem: "\(caFile) cannot be read as PEM certificates",
                fix: "point it at the certificate (PEM, -----BEGIN CERTIFICATE-----) the receiver's chains to")
        ]
    }
}
