import Foundation
import JWTKit

/// Verifies Google-signed OIDC ID tokens (Eventarc, Pub/Sub push): RS256 against the JWKS, then Google's claims.
struct IDTokenVerifier: Sendable {
    static let issuers: Set<String> = ["https://accounts.google.com", "accounts.google.com"]

    let keys: any JWKSProvider
    let audiences: Set<String>
    let allowedEmails: Set<String>
    let clockSkew: TimeInterval

    /// The claims rc-relay reads; the signature is checked by jwt-kit, every claim here.
    struct Claims: JWTPayload {
        var iss: String?
        var aud: AudienceClaim?
        var exp: Double?
        var iat: Double?
        var nbf: Double?
        var email: String?
        var email_verified: Bool?
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// Returns the verified service-account email, or says which check failed.
    func verify(authorization: String?, now: Date = Date()) async throws(OIDCError) -> String {
        guard let authorization, authorization.hasPrefix("Bearer ") else { throw .missingToken }
        let token = String(authorization.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
        let kid = try Self.keyID(of: token)
        guard let collection = try await keys.keys(containing: kid) else { throw .unknownKey }
        let claims: Claims
        do {
            claims = try await collection.verify(token, as: Claims.self)
        } catch {
            throw .invalidSignature
        }
        return try check(claims, now: now)
    }

    /// The longest token read: Google's ID tokens are about 1 KB.
    static let maximumTokenBytes = 16 * 1024

    /// The header's key id, after checking the token's shape and algorithm; nothing is verified yet.
    static func keyID(of token: String) throws(OIDCError) -> String {
        guard token.utf8.count <= maximumTokenBytes else { throw .malformedToken }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = json(parts[0]) else { throw .malformedToken }
        // Checked here, before jwt-kit: a token without a kid would otherwise meet jwt-kit's default key.
        guard let alg = header["alg"] as? String, alg == "RS256" else {
            throw .unsupportedAlgorithm(String(((header["alg"] as? String) ?? "none").prefix(16)))
        }
        guard let kid = header["kid"] as? String, !kid.isEmpty, kid.utf8.count <= 256 else { throw .unknownKey }
        return kid
    }

    /// Google's claims, once the signature has verified: issuer, audience, times, verified email, allow-list.
    func check(_ claims: Claims, now: Date) throws(OIDCError) -> String {
        let time = now.timeIntervalSince1970
        guard let iss = claims.iss, Self.issuers.contains(iss) else { throw .wrongIssuer }
        guard let aud = claims.aud, !audiences.isDisjoint(with: aud.value) else { throw .wrongAudience }
        guard let exp = claims.exp, exp.isFinite, time <= exp + clockSkew else { throw .expired }
        let iat = claims.iat ?? 0
        let nbf = claims.nbf ?? 0
        guard iat.isFinite, nbf.isFinite, iat <= time + clockSkew, nbf <= time + clockSkew else { throw .notYetValid }
        guard claims.email_verified == true else { throw .emailNotVerified }
        guard let email = claims.email, allowedEmails.contains(email) else { throw .emailNotAllowed }
        return email
    }

    static func json(_ part: Substring) -> [String: Any]? {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

/// An ID token's checks that need no key, as plain functions: what `FuzzIDToken` drives (a fuzz build is optimised, so
/// it cannot reach internal code through `@testable`).
public enum IDTokenInspection {
    /// The key id of a token whose shape and algorithm are acceptable; nothing is verified.
    public static func keyID(of token: String) throws(OIDCError) -> String {
        try IDTokenVerifier.keyID(of: token)
    }

    /// The verified email, if claims (as JSON, as they are once a signature has verified) pass Google's checks for
    /// these audiences and service accounts at `now`.
    public static func check(
        claims json: Data, audiences: Set<String>, allowedEmails: Set<String>, clockSkew: TimeInterval, now: Date
    ) throws(OIDCError) -> String {
        guard let claims = try? JSONDecoder().decode(IDTokenVerifier.Claims.self, from: json) else { throw .malformedToken }
        let verifier = IDTokenVerifier(keys: NoKeys(), audiences: audiences, allowedEmails: allowedEmails, clockSkew: clockSkew)
        return try verifier.check(claims, now: now)
    }

    private struct NoKeys: JWKSProvider {
        func keys(containing kid: String) async throws(OIDCError) -> JWTKeyCollection? { nil }
    }
}
