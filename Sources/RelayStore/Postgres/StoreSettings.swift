import Foundation

/// Where the shared state lives (`store.postgres`), parsed from the settings before anything connects.
package struct StoreSettings: Sendable, Equatable {
    package enum TLSMode: String, Sendable, Equatable, CaseIterable {
        /// Plain TCP: loopback or a private network only.
        case disable
        /// TLS when the server offers it, plain otherwise; the certificate is verified when TLS is used. The default on
        /// loopback only: a server that refuses TLS gets the password in clear text.
        case prefer
        /// TLS or no connection; the certificate and host name are verified (libpq's `verify-full`).
        case verifyFull = "verify-full"
    }

    package var host: String
    package var port: Int
    package var username: String
    package var password: String?
    package var database: String
    package var tls: TLSMode
    /// PEM certificates trusted besides the system's (a private CA, Cloud SQL's server CA).
    package var caFile: String?
    /// How long a replica's claim on a project (its deliveries, waves and polling) lasts unless renewed.
    package var lease: Duration
    /// The most one statement may take before the store counts as unreachable.
    package var statementTimeout: Duration

    package init(
        host: String, port: Int = 5432, username: String, password: String? = nil, database: String, tls: TLSMode = .prefer,
        caFile: String? = nil, lease: Duration = .seconds(15), statementTimeout: Duration = .seconds(5)
    ) {
        (self.host, self.port, self.username, self.password, self.database, self.tls, self.caFile) =
            (host, port, username, password, database, tls, caFile)
        (self.lease, self.statementTimeout) = (lease, statementTimeout)
    }

    /// Why a connection URL cannot be used.
    package struct URLError: Error, Equatable, CustomStringConvertible {
        package var description: String
    }

    /// Reads `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|verify-full]`.
    package static func parse(url text: String) throws(URLError) -> StoreSettings {
        guard let url = URLComponents(string: text), let scheme = url.scheme, ["postgres", "postgresql"].contains(scheme.lowercased())
        else { throw URLError(description: "it is not a postgres:// URL") }
        guard let host = url.host, !host.isEmpty else { throw URLError(description: "it names no host") }
        guard let user = url.user, !user.isEmpty else { throw URLError(description: "it names no user (postgres://USER@HOST/DATABASE)") }
        let database = String(url.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw URLError(description: "it names no database (postgres://USER@HOST/DATABASE)") }
        if let port = url.port, !(1...65535).contains(port) { throw URLError(description: "its port is not between 1 and 65535") }
        let name = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        // Without sslmode, a database elsewhere gets verified TLS: postgres-nio answers a server's request for the
        // password in clear text, so a connection an attacker can downgrade would give the password away.
        var settings = StoreSettings(
            host: name, port: url.port ?? 5432, username: url.user?.removingPercentEncoding ?? user,
            password: url.password?.removingPercentEncoding, database: database, tls: Self.isLoopback(name) ? .prefer : .verifyFull)
        for item in url.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                let modes = TLSMode.allCases.map(\.rawValue)
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw URLError(description: "sslmode must be one of \(modes.joined(separator: ", "))")
                }
                settings.tls = mode
            default:
                throw URLError(description: "it has an unknown parameter '\(item.name)' (only sslmode is read)")
            }
        }
        return settings
    }

    /// Whether the host is this machine (a Unix-domain-like trust: nobody on the path).
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The URL without its password, for logs and the admin API.
    package var redacted: String { "postgres://\(username)@\(host):\(port)/\(database)?sslmode=\(tls.rawValue)" }
}
