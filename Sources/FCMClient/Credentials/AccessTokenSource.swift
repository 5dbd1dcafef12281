import Foundation

/// An OAuth 2.0 access token and when it stops working.
public struct AccessToken: Sendable, Equatable {
    public var value: String
    public var expiresAt: Date
    /// The scopes granted, when the answer says (`scope`); `rc-relay doctor` shows them.
    public var scopes: [String]?
    public init(value: String, expiresAt: Date, scopes: [String]? = nil) {
        self.value = value
        self.expiresAt = expiresAt
        self.scopes = scopes
    }
}

/// Where FCM access tokens come from (a key file, the metadata server, or a test's own source).
public protocol AccessTokenSource: Sendable {
    /// A token valid for a while yet; cached where possible.
    func token() async throws(TokenError) -> AccessToken
    /// Drops `token` from the cache because FCM refused it.
    func invalidate(_ token: AccessToken) async
}

/// Why no access token could be had. Never carries the assertion or a token.
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The token endpoint answered with an error (`error` as OAuth names it).
    case refused(status: Int, error: String?, description: String?)
    /// The token endpoint could not be reached or did not answer in time.
    case transport(String)
    /// The token endpoint's answer is not a token response.
    case invalidResponse(String)
    /// The assertion could not be signed.
    case signing(String)

    public var description: String {
        switch self {
        case .refused(let status, let error, let description):
            "the token endpoint answered \(status)" + (error.map { " \($0)" } ?? "")
                + (description.map { ": \($0)" } ?? "")
        case .transport(let reason): "the token endpoint could not be reached: \(reason)"
        case .invalidResponse(let reason): "the token endpoint's answer is not usable: \(reason)"
        case .signing(let reason): "the JWT assertion could not be signed: \(reason)"
        }
    }
}
