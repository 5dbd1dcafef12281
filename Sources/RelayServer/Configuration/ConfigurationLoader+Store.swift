import FCMClient
import Foundation
import RelayStore

extension ConfigurationLoader {
    /// `store.postgres`: the database several replicas share, or nil.
    func resolveStore(_ file: ConfigurationFile) throws(ConfigurationError) -> StoreSettings? {
        guard let postgres = file.store?.postgres else {
            if file.store != nil {
                throw ConfigurationError(
                    key: "store.postgres", problem: "the store section names no database", fix: "set store.postgres.url, or remove the section")
            }
            return nil
        }
        guard let url = postgres.url else {
            throw ConfigurationError(
                key: "store.postgres.url", problem: "it is required", fix: "set postgres://USER@HOST:5432/DATABASE?sslmode=verify-full")
        }
        var settings: StoreSettings
        do throws(StoreSettings.URLError) {
            settings = try StoreSettings.parse(url: url)
        } catch {
            // The URL may carry a password: the error names the problem, never the URL.
            throw ConfigurationError(
                key: "store.postgres.url", problem: "\(error)", fix: "write postgres://USER@HOST:5432/DATABASE?sslmode=verify-full")
        }
        if let password = postgres.password {
            if settings.password != nil {
                throw ConfigurationError(
                    key: "store.postgres.password", problem: "the URL has a password too", fix: "keep the password in one place: this key")
            }
            settings.password = try read(password, key: "store.postgres.password")
        }
        if let caFile = postgres.caFile {
            guard BoundedFile.text(caFile)?.contains("-----BEGIN CERTIFICATE-----") == true else {
                throw ConfigurationError(
                    key: "store.postgres.caFile", problem: "\(caFile) cannot be read as PEM certificates",
                    fix: "point it at the CA certificate that signed the server's (for Cloud SQL, server-ca.pem)")
            }
            settings.caFile = caFile
        }
        if let seconds = postgres.leaseSeconds {
            guard seconds.isFinite, (3...300).contains(seconds) else {
                throw ConfigurationError(
                    key: "store.postgres.leaseSeconds", problem: "\(seconds) is not between 3 and 300",
                    fix: "15 lets another replica take over 15 s after one dies")
            }
            settings.lease = .milliseconds(Int64(seconds * 1000))
        }
        // A lease outlives a few statements that time out: one slow renewal never hands the lease back as it is taken.
        settings.statementTimeout = min(.seconds(5), settings.lease / 3)
        if file.delivery?.spoolDirectory != nil {
            throw ConfigurationError(
                key: "delivery.spoolDirectory", problem: "it is set together with store.postgres, whose outbox replaces the spool",
                fix: "remove delivery.spoolDirectory: with a store, events are kept in PostgreSQL")
        }
        return settings
    }
}
