import AsyncHTTPClient
import Foundation
import NIOCore

/// Access tokens from the metadata server of Cloud Run, GKE or GCE: the attached service account, no key file.
public struct MetadataServerExchange: TokenExchange {
    /// `http://metadata.google.internal` on Google Cloud.
    public static let defaultBaseURL = "http://metadata.google.internal"

    let baseURL: String
    let httpClient: HTTPClient
    let scopes: [String]
    let timeout: TimeAmount

    public init(
        baseURL: String = defaultBaseURL, httpClient: HTTPClient, scopes: [String] = ServiceAccountExchange.relayScopes,
        timeout: Duration = .seconds(10)
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.httpClient = httpClient
        self.scopes = scopes
        self.timeout = .seconds(timeout.components.seconds)
    }

    public func exchange() async throws(TokenError) -> AccessToken {
        let scopes =
            scopes.joined(separator: ",").addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(.init(charactersIn: ":/,"))) ?? ""
        var request = HTTPClientRequest(url: "\(baseURL)/computeMetadata/v1/instance/service-accounts/default/token?scopes=\(scopes)")
        request.headers.add(name: "Metadata-Flavor", value: "Google")
        return try await TokenResponse.fetch(request, httpClient: httpClient, timeout: timeout, issuedAt: Int(Date().timeIntervalSince1970))
    }

    /// The project the workload runs in.
    public func projectID() async throws(TokenError) -> String {
        var request = HTTPClientRequest(url: "\(baseURL)/computeMetadata/v1/project/project-id")
        request.headers.add(name: "Metadata-Flavor", value: "Google")
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: 1024)
            guard response.status == .ok else { throw TokenError.refused(status: Int(response.status.code), error: nil, description: "project-id") }
            return String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch let error as TokenError {
            throw error
        } catch {
            throw .transport("\(error)")
        }
    }
}
