import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP2
import NIOSSL
import NIOTLS

/// The emulator's HTTPS server: Hummingbird's HTTP/2-by-ALPN channel, with ``HTTP2ErrorGuard`` put in each HTTP/2
/// connection, so that its `GOAWAY` behaves as a Google front end's does.
struct GuardedHTTP2Channel<Inner: ServerChildChannel>: ServerChildChannel {
    let inner: Inner

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Inner.Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // The HTTP/2 handlers are added once ALPN has chosen h2, on the TLS handshake's event, which the ALPN handler
            // does not pass on: watch for it between the TLS handler and the ALPN handler.
            let tls = try channel.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(), position: .after(tls))
            return value
        }
    }

    func handle(value: Inner.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }

    /// Puts the guard right after swift-nio-http2's handler once the handshake has configured the connection.
    private final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event {
                let pipeline = context.pipeline
                // ALPN's handler configures HTTP/2 on the same event, after this one: add the guard on the next tick.
                context.eventLoop.assumeIsolated().execute {
                    guard let http2 = try? pipeline.syncOperations.handler(type: NIOHTTP2Handler.self) else { return }
                    try? pipeline.syncOperations.addHandler(HTTP2ErrorGuard(), position: .after(http2))
                }
                context.fireUserInboundEventTriggered(event)
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                return
            }
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// Keeps swift-nio-http2's errors on an HTTP/2 connection from reaching Hummingbird's connection manager, which closes
/// the whole connection on any error, with the answers of streams already processed in it.
///
/// After a `GOAWAY`, swift-nio-http2's server refuses new streams once none is open (`REFUSED_STREAM`, which a client
/// retries safely) and reports the refused stream's later frames as errors. Google's front ends keep serving the
/// streams they have taken and close the connection only when those are answered; with this guard the emulator does
/// too, and the client closes the connection once its streams are done (docs/performance.md, "TLS, HTTP/2 and GOAWAY").
/// swift-nio-http2 has already answered each error on the wire (`RST_STREAM`, or `GOAWAY` for a connection error).
final class HTTP2ErrorGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOHTTP2Errors.StreamError || error is any NIOHTTP2Error { return }
        context.fireErrorCaught(error)
    }
}
