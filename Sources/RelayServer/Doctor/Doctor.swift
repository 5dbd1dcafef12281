import AsyncHTTPClient
import FCMClient
import Foundation
import Logging
import RelayCore

/// `rc-relay doctor`: checks a configuration against the real Google endpoints it names (and the shared store and OIDC keys),
/// before the first publish finds what is wrong. It sends no ping: FCM is asked with `validate_only`.
public enum Doctor {
    /// Runs every check of `settings`; `configuration` is the file's path, for the report.
    public static func run(settings: RelaySettings, configuration: String, logger: Logger) async -> DoctorReport {
        let httpClient = RelayApplication.makeHTTPClient(settings)
        var checks = [
            DoctorCheck(
                check: "configuration", result: .ok,
                detail: "\(settings.projects.count) project(s), \(settings.projects.map(\.routes.routes.count).reduce(0, +)) route(s)")
        ]
        for project in settings.projects {
            checks += await ProjectChecks(settings: settings, project: project, httpClient: httpClient, logger: logger).run()
        }
        if let store = settings.store { checks.append(await storeCheck(store, logger: logger)) }
        if let oidc = settings.oidc { checks += await oidcChecks(oidc, httpClient: httpClient) }
        try? await httpClient.shutdown()
        return DoctorReport(configuration: configuration, checks: checks)
    }

    /// The report of a configuration that cannot be read: its one failed check.
    public static func unreadable(_ configuration: String, error: any Error) -> DoctorReport {
        let (detail, fix) =
            (error as? ConfigurationError).map { ($0.key == "(file)" ? $0.problem : "\($0.key): \($0.problem)", $0.fix) } ?? (
                "\(error)", "fix the file; rc-relay check-config FILE says more"
            )
        return DoctorReport(configuration: configuration, checks: [DoctorCheck(check: "configuration", result: .fail, detail: detail, fix: fix)])
    }

    static func oidcChecks(_ oidc: RelaySettings.OIDCSettings, httpClient: HTTPClient) async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        switch oidc.keys {
        case .url(let url):
            checks.append(await jwksCheck(url, httpClient: httpClient))
        case .json(let json):
            let count = Self.jwksKeyCount(Data(json.utf8)) ?? 0
            checks.append(
                DoctorCheck(
                    check: "oidc keys", result: count > 0 ? .ok : .fail, detail: "the JWKS file holds \(count) key(s)",
                    fix: count > 0 ? nil : "save Google's keys from \(RelaySettings.googleJWKSURL)"))
        }
        checks.append(
            oidc.audiences.isEmpty
                ? DoctorCheck(
                    check: "oidc audiences", result: .fail, detail: "no audience is set",
                    fix: "set oidc.audiences to the push endpoint's URL (Pub/Sub) or the Eventarc trigger's audience")
                : DoctorCheck(check: "oidc audiences", result: .ok, detail: oidc.audiences.sorted().joined(separator: ", ")))
        return checks
    }

    static func jwksCheck(_ url: String, httpClient: HTTPClient) async -> DoctorCheck {
        do {
            let response = try await httpClient.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1024 * 1024)
            guard response.status == .ok, let count = jwksKeyCount(Data(buffer: body)), count > 0 else {
                return DoctorCheck(
                    check: "oidc keys", result: .fail, detail: "\(url) answered \(response.status.code) without a key set",
                    fix: "set oidc.jwksURL to \(RelaySettings.googleJWKSURL)")
            }
            return DoctorCheck(check: "oidc keys", result: .ok, detail: "\(url) answers with \(count) key(s)")
        } catch {
            return DoctorCheck(
                check: "oidc keys", result: .fail, detail: "\(url) cannot be reached: \(error)",
                fix: "let the relay reach \(URL(string: url)?.host ?? url) (egress rules, a proxy, fcm.caFile)")
        }
    }

    static func jwksKeyCount(_ data: Data) -> Int? {
        ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["keys"].flatMap { $0 as? [Any] }?.count
    }
}
