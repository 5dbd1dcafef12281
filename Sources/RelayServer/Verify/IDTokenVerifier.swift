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
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Self.json(parts[0]) else { throw .malformedToken }
        // Checked here, before jwt-kit: a token without a kid would otherwise meet jwt-kit's default key.
        guard let alg = header["alg"] as? String, alg == "RS256" else {
            throw .unsupportedAlgorithm(String(((header["alg"] as? String) ?? "none").prefix(16)))
        }
        guard let kid = header["kid"] as? String, let collection = try await keys.keys(containing: kid) else {
            throw .unknownKey
        }
        let claims: Claims
        do {
            claims = try await collection.verify(token, as: Claims.self)
        } catch {
            throw .invalidSignature
        }
        let time = now.timeIntervalSince1970
        guard let iss = claims.iss, Self.issuers.contains(iss) else { throw .wrongIssuer }
        guard let aud = claims.aud, !audiences.isDisjoint(with: aud.value) else { throw .wrongAudience }
        guard let exp = claims.exp, time <= exp + clockSkew else { throw .expired }
        guard (claims.iat ?? 0) <= time + clockSkew, (claims.nbf ?? 0) <= time + clockSkew else { throw .notYetValid }
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
