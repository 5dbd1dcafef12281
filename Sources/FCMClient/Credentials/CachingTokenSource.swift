import Foundation
import NIOConcurrencyHelpers

/// One way of obtaining a fresh access token (a JWT-bearer grant, the metadata server, …).
public protocol TokenExchange: Sendable {
    func exchange() async throws(TokenError) -> AccessToken
}

/// Caches the token an exchange yields and refreshes it `refreshMargin` before it expires; concurrent callers
/// share one exchange, so a burst of pings makes one token request.
///
/// A fresh cached token is read under a lock, without entering the actor: every ping asks for one, and the actor
/// hop (contended when pings run in parallel) is only worth it for an exchange.
public actor CachingTokenSource: AccessTokenSource {
    let exchange: any TokenExchange
    let refreshMargin: TimeInterval
    private let cached = NIOLockedValueBox<AccessToken?>(nil)
    private var inFlight: Task<AccessToken, any Error>?
    /// Told of every exchange's outcome (true: a token came back), for metrics.
    let onExchange: @Sendable (Bool) -> Void

    /// Google's libraries refresh about four minutes early; so does this by default.
    public init(exchange: any TokenExchange, refreshMargin: Duration = .seconds(240), onExchange: @escaping @Sendable (Bool) -> Void = { _ in }) {
        self.exchange = exchange
        self.refreshMargin = Double(refreshMargin.components.seconds)
        self.onExchange = onExchange
    }

    /// Whether a cached token is good for longer than the refresh margin.
    public nonisolated var hasFreshToken: Bool { freshToken() != nil }

    public nonisolated func token() async throws(TokenError) -> AccessToken {
        if let token = freshToken() { return token }
        return try await exchanged()
    }

    private nonisolated func freshToken() -> AccessToken? {
        guard let token = cached.withLockedValue({ $0 }), token.expiresAt.timeIntervalSinceNow > refreshMargin else { return nil }
        return token
    }

    /// A fresh token after an exchange, shared with any exchange under way.
    private func exchanged() async throws(TokenError) -> AccessToken {
        if let token = freshToken() { return token }
        let task: Task<AccessToken, any Error>
        if let inFlight {
            task = inFlight
        } else {
            let (exchange, onExchange) = (self.exchange, self.onExchange)
            task = Task {
                do {
                    let token = try await exchange.exchange()
                    onExchange(true)
                    return token
                } catch {
                    onExchange(false)
                    throw error
                }
            }
            inFlight = task
        }
        defer { if inFlight == task { inFlight = nil } }
        do {
            let token = try await task.value
            cached.withLockedValue { $0 = token }
            return token
        } catch {
            throw error as? TokenError ?? .transport("\(error)")
        }
    }

    public nonisolated func invalidate(_ token: AccessToken) {
        cached.withLockedValue { if $0 == token { $0 = nil } }
    }
}
