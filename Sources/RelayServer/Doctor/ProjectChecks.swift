import AsyncHTTPClient
import FCMClient
import Foundation
import Logging
import NIOCore
import RelayCore

/// One project's checks against Google: credentials, the access token and its scopes, the host's clock, a
/// `validate_only` send of each route's message, and Remote Config when the relay needs it.
struct ProjectChecks {
    let settings: RelaySettings
    let project: RelaySettings.ProjectSettings
    let httpClient: HTTPClient
    let logger: Logger

    /// The host's clock may be this far from Google's before the check fails: Google refuses assertions whose times are
    /// off by more than a few minutes, and the relay's token refreshes assume the clock is right.
    static let clockTolerance: TimeInterval = 60
    static let cloudPlatform = "https://www.googleapis.com/auth/cloud-platform"
    static let messagingRole = "roles/firebasecloudmessaging.admin"
    static let remoteConfigRole = "roles/firebaseremoteconfig.viewer"

    var needsRemoteConfig: Bool { settings.poll != nil || project.routes.isChangeAware }

    func run() async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        // Who the relay is, and for which project.
        let identity = await credentials()
        let id = identity.project
        func check(_ name: String, _ result: DoctorCheck.Result, _ detail: String, fix: String? = nil) -> DoctorCheck {
            DoctorCheck(project: id ?? "(unknown project)", check: name, result: result, detail: detail, fix: fix)
        }
        /// The checks that need a token and a project, each a `skip` saying why, so a report always has the same rows.
        func skipped(_ why: String) -> [DoctorCheck] {
            messages(project: id ?? "-").map { check($0.0, .skip, why) }
                + [check("remote config", .skip, needsRemoteConfig ? why : Self.notNeeded)]
        }
        checks.append(check("credentials", identity.result, identity.detail, fix: identity.fix))
        checks.append(await clock(identity).map { check("clock", $0.0, $0.1, fix: $0.2) } ?? check("clock", .skip, "no answer to compare with"))
        guard let exchange = identity.exchange else {
            checks.append(check("access token", .skip, "no credentials to exchange (see credentials)"))
            return checks + skipped("no access token (see credentials)")
        }
        let source = CachingTokenSource(exchange: exchange)
        let token: AccessToken
        do {
            token = try await source.token()
        } catch {
            checks.append(check("access token", .fail, "\(error)", fix: tokenFix(error, identity: identity)))
            return checks + skipped("no access token (see access token)")
        }
        let (result, detail, fix) = await scopes(token, identity: identity)
        checks.append(check("access token", result, detail, fix: fix))
        guard let id else { return checks + skipped("the project id is unknown (see credentials)") }
        let sender = FCMSender(httpClient: httpClient, baseURL: settings.fcmBaseURL, tokenSource: source, timeout: settings.fcmTimeout)
        for (name, route, message) in messages(project: id) {
            let (result, detail, fix) = await validate(message, route: route, sender: sender, project: id, identity: identity)
            checks.append(check(name, result, detail, fix: fix))
        }
        if needsRemoteConfig {
            let (result, detail, fix) = await remoteConfig(project: id, source: source, identity: identity)
            checks.append(check("remote config", result, detail, fix: fix))
        } else {
            checks.append(check("remote config", .skip, Self.notNeeded))
        }
        return checks
    }

    static let notNeeded = "not needed: no polling and no change-aware route"

    // MARK: Credentials

    struct Identity {
        var project: String?
        var email: String?
        var exchange: (any TokenExchange)?
        /// Where a plain request shows Google's clock (the token endpoint, or the metadata server).
        var clockURL: String?
        /// Where the token's scopes can be read when its answer does not name them.
        var scopesFrom: ScopesSource?
        var result: DoctorCheck.Result
        var detail: String
        var fix: String?
    }

    func credentials() async -> Identity {
        switch project.credentials {
        case .keyFile(let path, let key):
            let exchange: (any TokenExchange)?
            var problem: String?
            do {
                exchange = try await ServiceAccountExchange(key: key, path: path, httpClient: httpClient, logger: logger)
            } catch {
                (exchange, problem) = (nil, "\(error)")
            }
            let configured = project.id ?? key.projectID
            var identity = Identity(
                project: configured, email: key.clientEmail, exchange: exchange, clockURL: key.tokenURI,
                scopesFrom: URL(string: key.tokenURI).flatMap { URL(string: "/tokeninfo", relativeTo: $0)?.absoluteString }.map(
                    ScopesSource.tokenInfo),
                result: .ok,
                detail: "key file \(path): \(key.clientEmail), project_id \(key.projectID ?? "(none)")")
            if let problem {
                (identity.result, identity.fix) = (.fail, "download a new key in the Firebase console")
                identity.detail += "; \(problem)"
            } else if let configured, let own = key.projectID, own != configured {
                identity.result = .fail
                identity.detail += "; the configuration names project \(configured)"
                identity.fix =
                    "use a key of a service account of \(configured) (Firebase console → Project settings → Service accounts), or set fcm.project to \(own)"
            }
            return identity
        case .metadataServer(let baseURL):
            let metadata = MetadataServerExchange(baseURL: baseURL, httpClient: httpClient, timeout: settings.fcmTimeout)
            var identity = Identity(
                project: project.id, exchange: metadata, clockURL: "\(baseURL)/computeMetadata/v1/",
                scopesFrom: .metadataServer("\(baseURL)/computeMetadata/v1/instance/service-accounts/default/scopes"), result: .ok,
                detail: "the metadata server at \(baseURL)")
            do {
                let reported = try await metadata.projectID()
                identity.project = project.id ?? reported
                identity.detail += ": project \(reported)"
                if let configured = project.id, configured != reported {
                    identity.result = .warn
                    identity.detail += "; fcm.project is \(configured)"
                    identity.fix = "nothing if the workload's service account was granted roles in \(configured); else set fcm.project to \(reported)"
                }
            } catch {
                identity.result = .fail
                identity.detail += " did not answer: \(error)"
                identity.fix = "off Google Cloud, set fcm.credentialsFile to a service-account key file"
                identity.exchange = nil
            }
            return identity
        }
    }

    /// The host's clock against the `Date` of a plain request to the token endpoint (any answer carries one).
    func clock(_ identity: Identity) async -> (DoctorCheck.Result, String, String?)? {
        guard let url = identity.clockURL else { return nil }
        do {
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Metadata-Flavor", value: "Google")
            let response = try await httpClient.execute(request, timeout: .seconds(10))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let now = Date()
            guard let header = response.headers.first(name: "Date"), let date = HTTPDate.parse(header) else {
                return (.skip, "\(url) sent no Date header", nil)
            }
            let skew = Int((now.timeIntervalSince(date)).rounded())
            // A `Date` header counts whole seconds, and a server may write the same one for a second or so.
            let shown = abs(skew) <= 2 ? "within 2 s of" : "\(abs(skew)) s \(skew > 0 ? "ahead of" : "behind")"
            guard abs(Double(skew)) <= Self.clockTolerance else {
                return (
                    .fail, "this host's clock is \(shown) the token endpoint's",
                    "set the host's clock right (NTP: timedatectl set-ntp true); Google refuses tokens asked for with a wrong clock"
                )
            }
            return (.ok, "this host's clock is \(shown) the token endpoint's", nil)
        } catch {
            return (.skip, "\(url) cannot be reached: \(error)", nil)
        }
    }

    /// The token's scopes (from its answer, else from `tokeninfo` or the metadata server): FCM's (or cloud-platform), and
    /// Remote Config's where needed.
    func scopes(_ token: AccessToken, identity: Identity) async -> (DoctorCheck.Result, String, String?) {
        let lifetime = Int(token.expiresAt.timeIntervalSinceNow.rounded())
        var known = token.scopes
        if known == nil, let source = identity.scopesFrom { known = await grantedScopes(token, from: source) }
        guard let scopes = known else { return (.ok, "issued, valid for \(lifetime) s (its scopes could not be read)", nil) }
        let granted = Set(scopes)
        var missing: [String] = []
        if granted.isDisjoint(with: [ServiceAccountExchange.messagingScope, Self.cloudPlatform]) {
            missing.append(ServiceAccountExchange.messagingScope)
        }
        if needsRemoteConfig, granted.isDisjoint(with: [RemoteConfigClient.scope, Self.cloudPlatform]) { missing.append(RemoteConfigClient.scope) }
        let shown = scopes.sorted().map { $0.replacingOccurrences(of: "https://www.googleapis.com/auth/", with: "") }
        let detail = "issued, valid for \(lifetime) s, with the scopes \(shown.joined(separator: ", "))"
        guard missing.isEmpty else {
            return (
                .fail, "\(detail); it lacks \(missing.joined(separator: " and "))",
                "give the workload the cloud-platform access scope (on Compute Engine: --scopes=cloud-platform), or use a service-account key file"
            )
        }
        return (.ok, detail, nil)
    }

    /// Where a token's scopes are read: Google's `tokeninfo` (`{"scope": "a b"}`) beside the token endpoint, or the
    /// metadata server's list of the instance's scopes (one a line).
    enum ScopesSource {
        case tokenInfo(String)
        case metadataServer(String)
    }

    func grantedScopes(_ token: AccessToken, from source: ScopesSource) async -> [String]? {
        var request: HTTPClientRequest
        switch source {
        case .tokenInfo(let url): request = HTTPClientRequest(url: "\(url)?access_token=\(token.value)")
        case .metadataServer(let url):
            request = HTTPClientRequest(url: url)
            request.headers.add(name: "Metadata-Flavor", value: "Google")
        }
        guard let response = try? await httpClient.execute(request, timeout: .seconds(10)), response.status == .ok,
            let body = try? await response.body.collect(upTo: 64 * 1024)
        else { return nil }
        let text: String?
        switch source {
        case .tokenInfo: text = ((try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any])?["scope"] as? String
        case .metadataServer: text = String(buffer: body)
        }
        let scopes = (text ?? "").split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        return scopes.isEmpty ? nil : scopes
    }

    func tokenFix(_ error: TokenError, identity: Identity) -> String {
        switch error {
        case .transport:
            "let the relay reach \(identity.clockURL.flatMap { URL(string: $0)?.host } ?? "the token endpoint") (egress rules, a proxy, fcm.caFile)"
        case .refused(_, "invalid_grant", _):
            "the key may be deleted or disabled, or the host's clock off: check the clock, else make a new key in the Firebase console"
        case .refused(_, "invalid_scope", _):
            "give the workload the cloud-platform access scope (on Compute Engine: --scopes=cloud-platform)"
        case .refused: "see the token endpoint's answer; a new key in the Firebase console usually helps"
        case .invalidResponse: "the token endpoint is not Google's: check token_uri in the key file"
        case .signing: "download a new key in the Firebase console"
        }
    }
}
