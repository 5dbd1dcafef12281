import AsyncHTTPClient
import Foundation
import NIOCore

/// Google's token answer (`{access_token, expires_in, token_type}`), shared by the token endpoint and the metadata server.
enum TokenResponse {
    /// The longest a token is believed to live, whatever `expires_in` says.
    static let maximumLifetime = 86_400

    private struct Body: Decodable {
        var access_token: String
        var expires_in: Int
        var scope: String?
    }

    private struct OAuthError: Decodable {
        var error: String?
        var error_description: String?
    }

    /// Sends `request` and reads a token from a 200, or the OAuth error from anything else.
    static func fetch(_ request: HTTPClientRequest, httpClient: HTTPClient, timeout: TimeAmount, issuedAt: Int) async throws(TokenError)
        -> AccessToken
    {
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
        guard let token = try? JSONDecoder().decode(Body.self, from: Data(body.readableBytesView)) else {
            throw .invalidResponse("no access_token and expires_in")
        }
        guard token.expires_in > 0, !token.access_token.isEmpty else {
            throw .invalidResponse("the token is empty or already expired (expires_in \(token.expires_in))")
        }
        // Whatever the upstream says, a token is not kept past a day (Google's live an hour), and no arithmetic traps.
        let lifetime = min(token.expires_in, maximumLifetime)
        return AccessToken(
            value: token.access_token, expiresAt: Date(timeIntervalSince1970: Double(issuedAt) + Double(lifetime)),
            scopes: token.scope.map { $0.split(separator: " ").map(String.init) })
    }
}

/// HTTP dates, as `Date` headers carry them.
public enum HTTPDate {
    /// RFC 9110's IMF-fixdate: `Thu, 26 Nov 2026 23:31:57 GMT`.
    public static func parse(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }
}
