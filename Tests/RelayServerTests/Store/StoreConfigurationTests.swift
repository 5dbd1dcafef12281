import FCMEmulator
import Foundation
import RelayStore
import Testing

@testable import RelayServer

/// `store.postgres`: what the loader accepts, and each refusal with its key (never the URL's password).
@Suite struct StoreConfigurationTests {
    let key: String

    init() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-store-config-\(UUID().uuidString).json")
        try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "http://127.0.0.1:1/token", state: EmulatorState()).write(to: path)
        key = path.path
    }

    func yaml(_ store: String, delivery: String = "") -> String {
        """
        webhook: {secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
        fcm: {credentialsFile: "\(key)"}
        \(delivery)
        \(store)
        """
    }

    func refused(_ yaml: String, environment: [String: String] = [:]) -> [ConfigurationError] {
        do {
            _ = try ConfigurationLoader(environment: environment).load(yaml: yaml)
            return []
        } catch {
            return error.all
        }
    }

    @Test func noStoreIsTheSingleProcessRelay() throws {
        #expect(try ConfigurationLoader(environment: [:]).load(yaml: yaml("")).store == nil)
    }

    @Test func aURLWithAPasswordFileAndALease() throws {
        let password = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-pg-password-\(UUID().uuidString)")
        try "s3cret-from-file\n".write(to: password, atomically: true, encoding: .utf8)
        let settings = try ConfigurationLoader(environment: [:]).load(
            yaml: yaml(
                """
                store: {postgres: {url: "postgres://relay@db.internal:6543/rc?sslmode=verify-full", password: {file: "\(password.path)"}, leaseSeconds: 30}}
                """))
        let store = try #require(settings.store)
        #expect(
            store
                == StoreSettings(
                    host: "db.internal", port: 6543, username: "relay", password: "s3cret-from-file", database: "rc", tls: .verifyFull,
                    lease: .seconds(30)))
        #expect(!store.redacted.contains("s3cret"))
    }

    @Test func environmentVariablesGiveTheStore() throws {
        let settings = try ConfigurationLoader(environment: [
            "RC_RELAY_STORE_POSTGRES_URL": "postgres://relay@10.0.0.5/rc", "RC_RELAY_STORE_POSTGRES_PASSWORD": "from-env",
        ]).load(yaml: yaml(""))
        #expect(settings.store?.host == "10.0.0.5")
        #expect(settings.store?.port == 5432)
        #expect(settings.store?.password == "from-env")
        // A database elsewhere gets verified TLS unless the URL says otherwise; loopback may go without.
        #expect(settings.store?.tls == .verifyFull)
        let loopback = try ConfigurationLoader(environment: ["RC_RELAY_STORE_POSTGRES_URL": "postgres://relay@127.0.0.1/rc"]).load(yaml: yaml(""))
        #expect(loopback.store?.tls == .prefer)
    }

    @Test func theStatementTimeoutIsAThirdOfAShortLease() throws {
        let settings = try ConfigurationLoader(environment: [:]).load(
            yaml: yaml("store: {postgres: {url: \"postgres://relay@db/rc\", leaseSeconds: 6}}"))
        #expect(settings.store?.statementTimeout == .seconds(2))
        #expect(
            try ConfigurationLoader(environment: [:]).load(yaml: yaml("store: {postgres: {url: \"postgres://relay@db/rc\"}}")).store?.statementTimeout
                == .seconds(5))
    }

    @Test(arguments: [
        ("mysql://relay@db/rc", "it is not a postgres:// URL"),
        ("postgres://db/rc", "it names no user"),
        ("postgres://relay@db/", "it names no database"),
        ("postgres://relay@db/rc?sslmode=allow", "sslmode must be one of disable, prefer, verify-full"),
        ("postgres://relay@db/rc?application_name=x", "unknown parameter 'application_name'"),
    ])
    func badURLsAreRefusedByKey(url: String, problem: String) {
        let errors = refused(yaml("store: {postgres: {url: \"\(url)\"}}"))
        #expect(errors.map(\.key) == ["store.postgres.url"])
        #expect(errors.first?.problem.contains(problem) == true, "\(errors)")
    }

    @Test func aPasswordInTwoPlacesIsRefusedWithoutShowingIt() {
        let errors = refused(yaml("store: {postgres: {url: \"postgres://relay:hunter2-in-url@db/rc\", password: other}}"))
        #expect(errors.map(\.key) == ["store.postgres.password"])
        #expect(!"\(errors)".contains("hunter2"))
    }

    @Test func theOutboxReplacesTheSpool() {
        let errors = refused(yaml("store: {postgres: {url: \"postgres://relay@db/rc\"}}", delivery: "delivery: {spoolDirectory: /tmp/spool}"))
        #expect(errors.map(\.key) == ["delivery.spoolDirectory"])
    }

    @Test(arguments: [2.0, 301, .nan])
    func aLeaseOutOfRangeIsRefused(seconds: Double) {
        let errors = refused(yaml("store: {postgres: {url: \"postgres://relay@db/rc\", leaseSeconds: \(seconds)}}"))
        #expect(errors.map(\.key) == ["store.postgres.leaseSeconds"])
    }

    @Test func aStoreSectionWithoutADatabaseIsRefused() {
        #expect(refused(yaml("store: {}")).map(\.key) == ["store.postgres"])
        #expect(refused(yaml("store: {postgres: {leaseSeconds: 10}}")).map(\.key) == ["store.postgres.url"])
        #expect(
            refused(yaml("store: {postgres: {url: \"postgres://relay@db/rc\", lease: 10}}")).map(\.key).first?.hasPrefix("store.postgres") == true)
    }
}
