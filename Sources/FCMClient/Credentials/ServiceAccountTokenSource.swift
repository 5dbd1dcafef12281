import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore

/// Access tokens from a service-account key: an RS256 JWT assertion exchanged at the key's `token_uri` (RFC 7523).
public struct ServiceAccountExchange: TokenExchange {
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// What the relay asks for: sending pings, and reading Remote Config's versions and templates (catch-up polling,
    /// change-aware routes). A scope grants nothing by itself; the account's IAM roles decide.
    public static let relayScopes = [messagingScope, RemoteConfigClient.scope]

    let key: ServiceAccountKey
    let keys: JWTKeyCollection
    let httpClient: HTTPClient
    let scopes: [String]
    let timeout: TimeAmount
    let logger: Logger

    public init(
        key: ServiceAccountKey, path: String = "(inline)", httpClient: HTTPClient, scopes: [String] = relayScopes,
        timeout: Duration = .seconds(10), logger: Logger
    ) async throws(CredentialsError) {
        let privateKey: Insecure.RSA.PrivateKey
        do {
            privateKey = try Insecure.RSA.PrivateKey(pem: key.privateKey)
        } catch {
            throw .invalidPrivateKey(path: path)
        }
        self.keys = await JWTKeyCollection().add(
            rsa: privateKey, digestAlgorithm: .sha256, kid: JWKIdentifier(string: key.privateKeyID))
        self.key = key
        self.httpClient = httpClient
        self.scopes = scopes
        self.timeout = .seconds(timeout.components.seconds)
        self.logger = logger
    }

    /// The assertion's claims (RFC 7523 with Google's `scope`).
    struct Assertion: JWTPayload {
        var iss: String
        var scope: String
        var aud: String
        var iat: Int
        var exp: Int
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    public func exchange() async throws(TokenError) -> AccessToken {
        let now = Int(Date().timeIntervalSince1970)
        let assertion: String
        do {
            assertion = try await keys.sign(
                Assertion(iss: key.clientEmail, scope: scopes.joined(separator: " "), aud: key.tokenURI, iat: now, exp: now + 3600),
                kid: JWKIdentifier(string: key.privateKeyID))
        } catch {
            throw .signing("\(error)")
        }
        var request = HTTPClientRequest(url: key.tokenURI)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        let token = try await TokenResponse.fetch(request, httpClient: httpClient, timeout: timeout, issuedAt: now)
        logger.debug("access token obtained from the key file's token_uri")
        return token
    }
}

/// A service-account key's tokens, cached: what production uses.
public enum ServiceAccountTokenSource {
    public static func make(
        key: ServiceAccountKey, path: String = "(inline)", httpClient: HTTPClient,
        refreshMargin: Duration = .seconds(240), logger: Logger, onExchange: @escaping @Sendable (Bool) -> Void = { _ in }
    ) async throws(CredentialsError) -> CachingTokenSource {
        CachingTokenSource(
            exchange: try await ServiceAccountExchange(key: key, path: path, httpClient: httpClient, logger: logger),
            refreshMargin: refreshMargin, onExchange: onExchange)
    }
}
