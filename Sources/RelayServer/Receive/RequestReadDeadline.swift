import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request is not read in full within `limit` of its head arriving: a client that sends
/// half a body (or one byte a second) holds neither a connection, nor the bytes buffered for it, nor a stop.
///
/// Headers are covered by the server's idle timeout, which counts from the last request part read: a client that
/// dribbles header lines never completes a part, so it is cut when the idle timeout passes. One timer per request,
/// scheduled and cancelled on the connection's own event loop.
final class RequestReadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let limit: TimeAmount
    private var timer: Scheduled<Void>?

    init(limit: TimeAmount) { self.limit = limit }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            timer?.cancel()
            let channel = context.channel
            timer = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
        case .body:
            break
        case .end:
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}
