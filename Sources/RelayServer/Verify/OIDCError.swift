/// Which check a Google-signed ID token failed. The description never contains the token.
public enum OIDCError: Error, Equatable, Sendable, CustomStringConvertible {
    case missingToken
    case malformedToken
    case unsupportedAlgorithm(String)
    case unknownKey
    case invalidSignature
    case wrongIssuer
    case wrongAudience
    case expired
    case notYetValid
    case emailNotVerified
    case emailNotAllowed
    case keysUnavailable(String)

    public var description: String {
        switch self {
        case .missingToken: "no Authorization: Bearer ID token"
        case .malformedToken: "the bearer token is not a JWT"
        case .unsupportedAlgorithm(let alg): "the token's algorithm '\(alg)' is not RS256"
        case .unknownKey: "the token's signing key (kid) is not in the JWKS"
        case .invalidSignature: "the token's signature does not verify"
        case .wrongIssuer: "the token's issuer is not accounts.google.com"
        case .wrongAudience: "the token's audience is not the configured one"
        case .expired: "the token has expired"
        case .notYetValid: "the token is not valid yet"
        case .emailNotVerified: "the token's email is not verified"
        case .emailNotAllowed: "the token's service account is not in oidc.allowedEmails"
        case .keysUnavailable(let reason): "the signing keys could not be fetched: \(reason)"
        }
    }
}
