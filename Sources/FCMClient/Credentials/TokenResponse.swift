import AsyncHTTPClient
import Foundation
import NIOCore

/// Google's token answer (`{access_token, expires_in, token_type}`), shared by the token endpoint and the metadata server.
enum TokenResponse {
    private struct Body: Decodable {
        var access_token: String
        var expires_in: Int
    }

    private struct OAuthError: Decodable {
        var error: String?
        var error_description: String?
    }

    /// Sends `request` and reads a token from a 200, or the OAuth error from anything else.
    static func fetch(_ request: HTTPClientRequest, httpClient: HTTPClient, timeout: TimeAmount, issuedAt: Int) async throws(TokenError) -> AccessToken {
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
        return AccessToken(value: token.access_token, expiresAt: Date(timeIntervalSince1970: Double(issuedAt + token.expires_in)))
    }
}
