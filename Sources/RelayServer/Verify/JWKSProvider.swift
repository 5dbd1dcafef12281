import AsyncHTTPClient
import Foundation
import JWTKit
import NIOCore

/// Where the keys that sign ID tokens come from: Google's JWKS URL, or a file for air-gapped runs.
protocol JWKSProvider: Sendable {
    /// The keys, if one has id `kid`; may refresh them first.
    func keys(containing kid: String) async throws(OIDCError) -> JWTKeyCollection?
}

/// A JWKS file read once at start-up.
struct FileJWKS: JWKSProvider {
    let collection: JWTKeyCollection
    let kids: Set<String>

    init(json: String) async throws {
        let jwks = try JSONDecoder().decode(JWKS.self, from: Data(json.utf8))
        self.collection = try await JWTKeyCollection().add(jwks: jwks)
        self.kids = Set(jwks.keys.compactMap { $0.keyIdentifier?.string })
    }

    func keys(containing kid: String) async throws(OIDCError) -> JWTKeyCollection? {
        kids.contains(kid) ? collection : nil
    }
}

/// A JWKS URL, cached; an unknown `kid` refetches it, at most once per `minimumRefreshInterval` (key rotation
/// without letting forged `kid`s turn into a storm of fetches). Concurrent callers share one fetch.
actor RemoteJWKS: JWKSProvider {
    let url: String
    let httpClient: HTTPClient
    let minimumRefreshInterval: TimeInterval
    let maximumAge: TimeInterval
    private var cached: (collection: JWTKeyCollection, kids: Set<String>, fetchedAt: Date)?
    private var lastAttempt: Date?
    /// Why the last fetch failed, until one succeeds: within the refresh interval after a failure, a token whose key
    /// is not cached is unverifiable (503), not forged (401).
    private var lastFailure: OIDCError?
    private var inFlight: Task<(JWTKeyCollection, Set<String>), any Error>?

    init(url: String, httpClient: HTTPClient, minimumRefreshInterval: Duration, maximumAge: Duration = .seconds(3600)) {
        self.url = url
        self.httpClient = httpClient
        self.minimumRefreshInterval = Double(minimumRefreshInterval.components.seconds)
        self.maximumAge = Double(maximumAge.components.seconds)
    }

    func keys(containing kid: String) async throws(OIDCError) -> JWTKeyCollection? {
        if let cached, cached.kids.contains(kid), -cached.fetchedAt.timeIntervalSinceNow < maximumAge {
            return cached.collection
        }
        if let lastAttempt, -lastAttempt.timeIntervalSinceNow < minimumRefreshInterval, inFlight == nil {
            if let cached, cached.kids.contains(kid) { return cached.collection }
            if let lastFailure { throw lastFailure }
            return nil
        }
        let task: Task<(JWTKeyCollection, Set<String>), any Error>
        if let inFlight {
            task = inFlight
        } else {
            lastAttempt = Date()
            task = Task { try await self.fetch() }
            inFlight = task
        }
        defer { if inFlight == task { inFlight = nil } }
        do {
            let (collection, kids) = try await task.value
            cached = (collection, kids, Date())
            lastFailure = nil
            return kids.contains(kid) ? collection : nil
        } catch {
            let failure = error as? OIDCError ?? .keysUnavailable("\(error)")
            lastFailure = failure
            if let cached, cached.kids.contains(kid) { return cached.collection }  // stale keys beat none
            throw failure
        }
    }

    private func fetch() async throws(OIDCError) -> (JWTKeyCollection, Set<String>) {
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        do {
            let response = try await httpClient.execute(request, timeout: .seconds(10))
            guard response.status == .ok else { throw OIDCError.keysUnavailable("the JWKS URL answered \(response.status.code)") }
            let body = try await response.body.collect(upTo: 256 * 1024)
            let jwks = try JSONDecoder().decode(JWKS.self, from: Data(body.readableBytesView))
            let collection = try await JWTKeyCollection().add(jwks: jwks)
            return (collection, Set(jwks.keys.compactMap { $0.keyIdentifier?.string }))
        } catch let error as OIDCError {
            throw error
        } catch {
            throw .keysUnavailable("\(error)")
        }
    }
}
