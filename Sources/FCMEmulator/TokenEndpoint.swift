import Foundation
import Hummingbird
import JWTKit

/// Google's OAuth token endpoint for the JWT-bearer grant: checks the assertion, then issues an access token.
struct TokenEndpoint {
    let state: EmulatorState

    struct Claims: JWTPayload {
        var iss: String?
        var scope: String?
        var aud: String?
        var iat: Int?
        var exp: Int?
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    func handle(_ request: Request) async throws -> Response {
        let body = try await request.body.collect(upTo: 64 * 1024)
        let form = Self.formFields(String(buffer: body))
        await state.noteTokenRequest(assertion: form["assertion"])
        if let fault = await state.nextFault(for: "token"), let status = fault.status {
            return GoogleErrors.oauth("temporarily_unavailable", "Injected fault.", status: .init(code: status))
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return GoogleErrors.oauth("unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
        }
        guard let assertion = form["assertion"] else {
            return GoogleErrors.oauth("invalid_request", "Missing required parameter: assertion")
        }
        switch await check(assertion) {
        case .failure(let reason):
            return GoogleErrors.oauth("invalid_grant", reason.reason)
        case .success(let (project, scopes)):
            guard let (token, lifetime) = await state.issueToken(project: project, scopes: scopes) else {
                return GoogleErrors.oauth("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
            }
            return GoogleErrors.json(Self.answer(token: token, lifetime: lifetime))
        }
    }

    struct Refusal: Error { var reason: String }

    /// Google's token answer: it does not say which scopes were granted (`GET /tokeninfo` does).
    static func answer(token: String, lifetime: Int) -> [String: Any] {
        ["access_token": token, "expires_in": lifetime, "token_type": "Bearer"]
    }

    /// `GET /tokeninfo?access_token=…`, as Google's OAuth endpoint answers it: the token's scopes and how long it lives.
    func info(_ request: Request) async -> Response {
        guard let value = request.uri.queryParameters["access_token"].map(String.init), let token = await state.token(value) else {
            return GoogleErrors.oauth("invalid_token", "Invalid Value")
        }
        return GoogleErrors.json([
            "scope": token.scopes.sorted().joined(separator: " "), "expires_in": String(max(0, Int(token.expiresAt.timeIntervalSinceNow))),
            "access_type": "online",
        ])
    }

    /// RS256 signature by a registered key, then Google's claim rules.
    func check(_ assertion: String) async -> Result<(String, Set<String>), Refusal> {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Self.base64URL(parts[0]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any]
        else { return .failure(Refusal(reason: "Invalid JWT: malformed.")) }
        guard header["alg"] as? String == "RS256" else {
            return .failure(Refusal(reason: "Invalid JWT: alg must be RS256."))
        }
        guard let kid = header["kid"] as? String, let account = await state.account(keyID: kid) else {
            return .failure(Refusal(reason: "Invalid JWT Signature."))
        }
        let claims: Claims
        do {
            claims = try await account.keys.verify(assertion, as: Claims.self)
        } catch {
            return .failure(Refusal(reason: "Invalid JWT Signature."))
        }
        let now = Int(Date().timeIntervalSince1970)
        guard claims.iss == account.email else { return .failure(Refusal(reason: "Invalid JWT: iss is not the key's client_email.")) }
        // Google accepts its canonical endpoint as audience too; google-auth always uses it.
        guard claims.aud == account.tokenURI || claims.aud == "https://oauth2.googleapis.com/token" else {
            return .failure(Refusal(reason: "Invalid JWT: aud must be \(account.tokenURI)."))
        }
        guard let iat = claims.iat, let exp = claims.exp else { return .failure(Refusal(reason: "Invalid JWT: iat and exp are required.")) }
        guard iat <= now + 60 else { return .failure(Refusal(reason: "Invalid JWT: iat is in the future.")) }
        guard exp > now else {
            return .failure(
                Refusal(
                    reason:
                        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values."))
        }
        guard exp - iat <= 3600 else {
            return .failure(
                Refusal(
                    reason:
                        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values."))
        }
        let scopes = Set((claims.scope ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: Self.knownScopes) else {
            return .failure(Refusal(reason: "Invalid OAuth scope or ID token audience provided."))
        }
        return .success((account.project, scopes))
    }

    /// The scopes this emulator serves: FCM's, Remote Config's, and the one that covers both.
    static let knownScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/firebase.remoteconfig",
        "https://www.googleapis.com/auth/cloud-platform",
    ]

    static func formFields(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if kv.count == 2 { fields[kv[0]] = kv[1] }
        }
        return fields
    }

    static func base64URL(_ part: Substring) -> Data? {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return Data(base64Encoded: text)
    }
}
