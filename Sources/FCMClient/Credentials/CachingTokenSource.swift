import Foundation

/// One way of obtaining a fresh access token (a JWT-bearer grant, the metadata server, …).
public protocol TokenExchange: Sendable {
    func exchange() async throws(TokenError) -> AccessToken
}

/// Caches the token an exchange yields and refreshes it `refreshMargin` before it expires; concurrent callers
/// share one exchange, so a burst of pings makes one token request.
public actor CachingTokenSource: AccessTokenSource {
    let exchange: any TokenExchange
    let refreshMargin: TimeInterval
    private var cached: AccessToken?
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
    public var hasFreshToken: Bool {
        guard let cached else { return false }
        return cached.expiresAt.timeIntervalSinceNow > refreshMargin
    }

    public func token() async throws(TokenError) -> AccessToken {
        if let cached, cached.expiresAt.timeIntervalSinceNow > refreshMargin { return cached }
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
            cached = token
            return token
        } catch {
            throw error as? TokenError ?? .transport("\(error)")
        }
    }

    public func invalidate(_ token: AccessToken) {
        if cached == token { cached = nil }
    }
}
