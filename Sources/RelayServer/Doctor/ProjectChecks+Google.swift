import AsyncHTTPClient
import FCMClient
import Foundation
import Logging
import NIOCore
import RelayCore

/// A project's checks against FCM and Remote Config: a `validate_only` send of each route's message, and
/// `listVersions` where the relay needs it.
extension ProjectChecks {
    // MARK: FCM

    /// Each route's message as a version would make it: to its target (a waved route: its first shard), and to each
    /// topic of its audience (change-aware routes).
    func messages(project id: String) -> [(String, Route, FCMMessage)] {
        let version = TemplateVersion(
            versionNumber: 1, updateTime: ISO8601DateFormatter().string(from: Date()), updateUser: .init(email: "doctor@rc-relay.invalid"),
            description: "rc-relay doctor", updateOrigin: "CONSOLE", updateType: "INCREMENTAL_UPDATE")
        var out: [(String, Route, FCMMessage)] = []
        // A route with another target (an HTTP target) sends no FCM message: the doctor calls no receiver.
        for route in project.routes.routes where route.destination == nil {
            let message = route.message(for: version, project: id)
            if let waves = route.waves {
                var first = message
                first.target = .topic(waves.topic(shard: 0))
                out.append(("fcm route \(route.name) shard 0", route, first))
            } else {
                out.append(("fcm route \(route.name)", route, message))
            }
            for (condition, topic) in route.audience.sorted(by: { $0.key < $1.key }) {
                var part = message
                part.target = .topic(topic)
                out.append(("fcm route \(route.name) audience \(condition)", route, part))
            }
        }
        return out
    }

    func validate(_ message: FCMMessage, route: Route, sender: FCMSender, project id: String, identity: Identity) async
        -> (DoctorCheck.Result, String, String?)
    {
        let target = message.target.key
        do {
            _ = try await sender.send(project: id, message: ByteBuffer(bytes: message.json), validateOnly: true)
            return (.ok, "FCM accepts the message to \(target) (validate_only: nothing was sent)", nil)
        } catch {
            let who = identity.email ?? "the workload's service account"
            switch error {
            case .rejected(let answer):
                let said =
                    "FCM answered \(answer.httpStatus) \(answer.errorCode ?? answer.status ?? "")".trimmingCharacters(in: .whitespaces)
                    + (answer.message.map { ": \($0)" } ?? "")
                switch (answer.httpStatus, answer.errorCode) {
                case (400, _):
                    return (.fail, said, "change route '\(route.name)' in the configuration: FCM refuses its message to \(target)")
                case (403, "SENDER_ID_MISMATCH"):
                    return (.fail, said, "the credentials are not of project \(id): use a key of a service account of \(id)")
                case (403, _) where answer.message?.contains("scope") == true:
                    return (
                        .fail, said,
                        "the access token lacks FCM's scope: give the workload the cloud-platform access scope, or use a service-account key file"
                    )
                case (403, _):
                    return (.fail, said, "grant \(Self.messagingRole) to \(who) in project \(id) (IAM & Admin → Grant access)")
                case (401, _):
                    return (.fail, said, "FCM does not take the access token: check the key and the host's clock")
                case (404, _):
                    return (.fail, said, "check fcm.project (\(id)), and enable the Firebase Cloud Messaging API in the project")
                default:
                    return (.fail, said, "FCM is not answering normally: try again in a minute")
                }
            case .transport(let reason):
                return (
                    .fail, "FCM could not be reached: \(reason)",
                    "let the relay reach \(URL(string: settings.fcmBaseURL)?.host ?? settings.fcmBaseURL)"
                )
            case .token(let tokenError):
                return (.fail, "no access token: \(tokenError)", tokenFix(tokenError, identity: identity))
            case .invalidResponse(let reason):
                return (.fail, "FCM's answer is not usable: \(reason)", "check fcm.baseURL: it should be Google's")
            case .withheld(let reason):
                return (.fail, "not sent: \(reason)", nil)  // the doctor's sends have no gate
            }
        }
    }

    // MARK: Remote Config

    func remoteConfig(project id: String, source: any AccessTokenSource, identity: Identity) async -> (DoctorCheck.Result, String, String?) {
        let client = RemoteConfigClient(
            httpClient: httpClient, baseURL: settings.remoteConfigBaseURL, tokenSource: source, timeout: settings.remoteConfigTimeout)
        let why = settings.poll != nil ? "catch-up polling needs it" : "change-aware routes need it"
        do {
            let page = try await client.listVersions(project: id, pageSize: 1)
            let newest = page.versions.first.flatMap { (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any] }?["versionNumber"]
            return (.ok, "listVersions answers (\(why)); " + (newest.map { "the newest version is \($0)" } ?? "no version was published yet"), nil)
        } catch {
            let who = identity.email ?? "the workload's service account"
            switch error {
            case .rejected(let answer) where answer.httpStatus == 403 && answer.message?.contains("scope") == true:
                return (
                    .fail, "\(error)",
                    "the access token lacks Remote Config's scope: give the workload the cloud-platform access scope, or use a service-account key file"
                )
            case .rejected(let answer) where answer.httpStatus == 403:
                return (.fail, "\(error)", "grant \(Self.remoteConfigRole) to \(who) in project \(id) (IAM & Admin → Grant access); \(why)")
            case .rejected(let answer) where answer.httpStatus == 404:
                return (.fail, "\(error)", "check fcm.project (\(id)), and enable the Firebase Remote Config API in the project")
            case .transport:
                return (
                    .fail, "\(error)", "let the relay reach \(URL(string: settings.remoteConfigBaseURL)?.host ?? settings.remoteConfigBaseURL)"
                )
            default:
                return (.fail, "\(error)", "Remote Config is not answering normally: try again in a minute")
            }
        }
    }
}
