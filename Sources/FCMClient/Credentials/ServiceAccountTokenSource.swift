import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore

/// Access tokens from a service-account key: an RS256 JWT assertion exchanged at the key's `token_uri`.
///
/// The token is cached and refreshed `refreshMargin` before it expires; concurrent callers share one request.
public actor ServiceAccountTokenSource: AccessTokenSource {
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    let key: ServiceAccountKey
    let keys: JWTKeyCollection
    let httpClient: HTTPClient
    let scopes: [String]
    let refreshMargin: TimeInterval
    let timeout: TimeAmount
    let logger: Logger
    private var cached: AccessToken?
    private var inFlight: Task<AccessToken, any Error>?

    /// Google's libraries refresh about four minutes early; so does this by default.
    public init(
        key: ServiceAccountKey, path: String = "(inline)", httpClient: HTTPClient,
        scopes: [String] = [messagingScope], refreshMargin: Duration = .seconds(240),
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
        self.refreshMargin = Double(refreshMargin.components.seconds)
        self.timeout = .seconds(timeout.components.seconds)
        self.logger = logger
    }

    public func token() async throws(TokenError) -> AccessToken {
        if let cached, cached.expiresAt.timeIntervalSinceNow > refreshMargin { return cached }
        let task: Task<AccessToken, any Error>
        if let inFlight {
            task = inFlight
        } else {
            task = Task { try await self.exchange() }
            inFlight = task
        }
        do {
            let token = try await task.value
            if inFlight == task { inFlight = nil }
            cached = token
            return token
        } catch {
            if inFlight == task { inFlight = nil }
            throw error as? TokenError ?? .transport("\(error)")
        }
    }

    public func invalidate(_ token: AccessToken) {
        if cached == token { cached = nil }
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

    private struct TokenResponse: Decodable {
        var access_token: String
        var expires_in: Int
        var token_type: String?
    }

    private struct OAuthError: Decodable {
        var error: String?
        var error_description: String?
    }

    /// One JWT-bearer grant at `token_uri`.
    private func exchange() async throws(TokenError) -> AccessToken {
        let now = Int(Date().timeIntervalSince1970)
        let assertion: String
        do {
            assertion = try await keys.sign(
                Assertion(
                    iss: key.clientEmail, scope: scopes.joined(separator: " "), aud: key.tokenURI, iat: now,
                    exp: now + 3600),
                kid: JWKIdentifier(string: key.privateKeyID))
        } catch {
            throw .signing("\(error)")
        }
        var request = HTTPClientRequest(url: key.tokenURI)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        let status: Int
        let body: ByteBuffer
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            status = Int(response.status.code)
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch {
            throw .transport("\(error)")
        }
        guard status == 200 else {
            let detail = try? JSONDecoder().decode(OAuthError.self, from: Data(body.readableBytesView))
            throw .refused(status: status, error: detail?.error, description: detail?.error_description)
        }
        guard let response = try? JSONDecoder().decode(TokenResponse.self, from: Data(body.readableBytesView)) else {
            throw .invalidResponse("no access_token and expires_in")
        }
        logger.debug("access token obtained", metadata: ["expires_in": "\(response.expires_in)"])
        return AccessToken(
            value: response.access_token, expiresAt: Date(timeIntervalSince1970: Double(now + response.expires_in)))
    }
}
