import Hummingbird
import NIOCore

/// The request context: Hummingbird's core storage plus the peer's address for logs.
public struct RelayRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer (the reverse proxy, when there is one).
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }
}
