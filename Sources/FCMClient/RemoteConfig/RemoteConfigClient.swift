import AsyncHTTPClient
import Foundation
import NIOCore

/// Remote Config's REST API, the two calls the relay makes: `listVersions` (what was published) and `get` of a
/// template at a version. On the same token sources as ``FCMSender`` (the token must carry the Remote Config or
/// cloud-platform scope). One attempt per call: the caller retries by ``RemoteConfigError`` as it does FCM's errors.
/// It knows nothing of webhooks or routes: versions and templates come back as Google's JSON.
public struct RemoteConfigClient: Sendable {
    /// Google's Remote Config host.
    public static let defaultBaseURL = "https://firebaseremoteconfig.googleapis.com"
    /// The scope both calls need (cloud-platform also does).
    public static let scope = "https://www.googleapis.com/auth/firebase.remoteconfig"
    /// The largest answer read: a template holds at most 2,000 parameters with values of a few KB.
    public static let maximumBodyBytes = 4 * 1024 * 1024
    /// The most versions one `listVersions` page holds (Google keeps 300 in all).
    public static let maximumPageSize = 300

    let httpClient: HTTPClient
    let baseURL: String
    let tokenSource: any AccessTokenSource
    let timeout: TimeAmount

    public init(httpClient: HTTPClient, baseURL: String = defaultBaseURL, tokenSource: any AccessTokenSource, timeout: Duration = .seconds(10)) {
        self.httpClient = httpClient
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.tokenSource = tokenSource
        self.timeout = .seconds(max(1, timeout.components.seconds))
    }

    /// One page of `listVersions`, newest first: each version as Google's JSON object, and the next page's token.
    public struct VersionPage: Sendable {
        public var versions: [Data]
        public var nextPageToken: String?
        /// Entries of the list that were not JSON objects, left out.
        public var skipped = 0
    }

    /// A template at a version: Google's JSON object (its `version` member included) and its `ETag`.
    public struct FetchedTemplate: Sendable {
        public var json: Data
        public var etag: String?
    }

    /// `GET …/remoteConfig:listVersions`, newest first. `pageSize` is capped at 300; `timeout` shortens the
    /// configured one (a caller's deadline).
    public func listVersions(project: String, pageSize: Int, pageToken: String? = nil, timeout: Duration? = nil) async throws(RemoteConfigError)
        -> VersionPage
    {
        var query = "pageSize=\(min(max(1, pageSize), Self.maximumPageSize))"
        if let pageToken { query += "&pageToken=\(Self.escape(pageToken))" }
        let (body, _) = try await get("/v1/projects/\(Self.escape(project))/remoteConfig:listVersions?\(query)", timeout: timeout)
        guard let page = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
            let listed = (page["versions"] ?? [Any]()) as? [Any]
        else { throw .invalidResponse("the version list is not JSON of Google's shape") }
        let objects = listed.compactMap { $0 as? [String: Any] }
        let versions = objects.compactMap { try? JSONSerialization.data(withJSONObject: $0) }
        let next = (page["nextPageToken"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        return VersionPage(versions: versions, nextPageToken: next, skipped: listed.count - versions.count)
    }

    /// `GET …/remoteConfig?versionNumber=N`: the template published as version `versionNumber`.
    public func template(project: String, versionNumber: Int64, timeout: Duration? = nil) async throws(RemoteConfigError) -> FetchedTemplate {
        let (body, etag) = try await get("/v1/projects/\(Self.escape(project))/remoteConfig?versionNumber=\(versionNumber)", timeout: timeout)
        guard (try? JSONSerialization.jsonObject(with: body)) is [String: Any] else { throw .invalidResponse("the template is not a JSON object") }
        return FetchedTemplate(json: body, etag: etag)
    }

    /// A GET with a bearer token; a 401 drops the cached token and tries once more, as ``FCMSender`` does.
    private func get(_ path: String, timeout: Duration?) async throws(RemoteConfigError) -> (Data, String?) {
        let limit = timeout.map { TimeAmount.milliseconds(max(1, Int64($0 / .milliseconds(1)))) }.map { min($0, self.timeout) } ?? self.timeout
        do {
            return try await attempt(path, timeout: limit)
        } catch .rejected(let response) where response.httpStatus == 401 {
            return try await attempt(path, timeout: limit)
        }
    }

    private func attempt(_ path: String, timeout: TimeAmount) async throws(RemoteConfigError) -> (Data, String?) {
        let token: AccessToken
        do {
            token = try await tokenSource.token()
        } catch {
            throw .token(error)
        }
        var request = HTTPClientRequest(url: baseURL + path)
        request.headers.add(name: "Authorization", value: "Bearer \(token.value)")
        request.headers.add(name: "Accept", value: "application/json")
        let status: Int
        let (retryAfter, etag): (String?, String?)
        let body: ByteBuffer
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            status = Int(response.status.code)
            (retryAfter, etag) = (response.headers.first(name: "Retry-After"), response.headers.first(name: "ETag"))
            body = try await response.body.collect(upTo: Self.maximumBodyBytes)
        } catch let error as NIOTooManyBytesError {
            _ = error
            throw .tooLarge(Self.maximumBodyBytes)
        } catch {
            throw .transport("\(error)")
        }
        guard status == 200 else {
            if status == 401 { await tokenSource.invalidate(token) }
            let google = FCMSender.errorResponse(status: status, retryAfter: retryAfter, body: body)
            throw .rejected(google)
        }
        return (Data(body.readableBytesView), etag)
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? text
    }
}

/// Why a Remote Config call gave no answer.
public enum RemoteConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Remote Config answered with an error status (Google's error body, as FCM's is read).
    case rejected(FCMErrorResponse)
    /// Remote Config could not be reached, or did not answer in time.
    case transport(String)
    /// No access token could be had.
    case token(TokenError)
    /// The answer is not what Google sends.
    case invalidResponse(String)
    /// The answer is larger than the relay reads.
    case tooLarge(Int)

    public var description: String {
        switch self {
        case .rejected(let response):
            "Remote Config answered \(response.httpStatus)" + (response.status.map { " \($0)" } ?? "") + (response.message.map { ": \($0)" } ?? "")
        case .transport(let reason): "Remote Config could not be reached: \(reason)"
        case .token(let error): "no access token: \(error)"
        case .invalidResponse(let reason): "Remote Config's answer is not usable: \(reason)"
        case .tooLarge(let limit): "Remote Config's answer is larger than \(limit) bytes"
        }
    }
}
