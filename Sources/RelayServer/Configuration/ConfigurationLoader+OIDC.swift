import FCMClient
import Foundation
import JWTKit
import RelayCore

/// The `oidc` section: which Google-signed ID tokens are accepted.
extension ConfigurationLoader {
    func resolveOIDC(_ oidc: ConfigurationFile.OIDC?) throws(ConfigurationError) -> RelaySettings.OIDCSettings {
        guard let audiences = oidc?.audiences, !audiences.isEmpty else {
            throw ConfigurationError(
                key: "oidc.audiences", problem: "webhook.auth needs ID tokens but no audience is configured",
                fix:
                    "set it to the audience the sender uses: for Eventarc and Pub/Sub push, by default the full push URL, e.g. https://relay.example.com/webhooks/remote-config"
            )
        }
        guard let emails = oidc?.allowedEmails, !emails.isEmpty else {
            throw ConfigurationError(
                key: "oidc.allowedEmails", problem: "no service account is allowed, so every token would be refused",
                fix: "list the service account the trigger or subscription pushes as, e.g. rc-relay-invoker@my-project.iam.gserviceaccount.com")
        }
        let keys: RelaySettings.OIDCSettings.Keys
        switch (oidc?.jwksURL, oidc?.jwksFile) {
        case (.some, .some):
            throw ConfigurationError(key: "oidc.jwksFile", problem: "both jwksURL and jwksFile are set", fix: "keep one")
        case (nil, let path?):
            guard let json = BoundedFile.text(path) else {
                throw ConfigurationError(
                    key: "oidc.jwksFile", problem: "\(path) cannot be read, or is not a regular file of at most 1 MiB",
                    fix: "save Google's keys with: curl -o \(path) \(RelaySettings.googleJWKSURL)")
            }
            // Read as the relay will read it, so check-config refuses what serve would.
            guard (try? JSONDecoder().decode(JWKS.self, from: Data(json.utf8))) != nil else {
                throw ConfigurationError(
                    key: "oidc.jwksFile", problem: "\(path) is not a JWKS (JSON Web Key Set)",
                    fix: "save Google's keys with: curl -o \(path) \(RelaySettings.googleJWKSURL)")
            }
            keys = .json(json)
        case (let url, nil):
            let url = url ?? RelaySettings.googleJWKSURL
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ConfigurationError(key: "oidc.jwksURL", problem: "'\(url)' is not an http(s) URL", fix: "use \(RelaySettings.googleJWKSURL)")
            }
            keys = .url(url)
        }
        let skew = oidc?.clockSkewSeconds ?? 60
        guard (0...300).contains(skew) else {
            throw ConfigurationError(key: "oidc.clockSkewSeconds", problem: "\(skew) is outside 0 to 300", fix: "use 60")
        }
        let refresh = oidc?.jwksMinRefreshSeconds ?? 60
        guard (1...3600).contains(refresh) else {
            throw ConfigurationError(key: "oidc.jwksMinRefreshSeconds", problem: "\(refresh) is outside 1 to 3600", fix: "use 60")
        }
        return .init(
            keys: keys, audiences: Set(audiences), allowedEmails: Set(emails), clockSkew: .seconds(skew),
            jwksMinimumRefresh: .seconds(refresh))
    }
}
