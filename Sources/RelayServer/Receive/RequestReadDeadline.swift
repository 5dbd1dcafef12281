import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request is not read in full within `limit` of its head arriving: a client that sends
/// half a body (or one byte a second) holds neither a connection, nor the bytes buffered for it, nor a stop.
///
/// Headers are covered by the server's idle timeout, which counts from the last request part read: a client that
/// dribbles header lines never completes a part, so it is cut when the idle timeout passes. One timer per connection
/// at most, on its own event loop: each request head sets the deadline, and the timer, when it fires, closes the
/// connection if a request is still being read past it, or waits for the next deadline. A timer scheduled and
/// cancelled per request was 3 % of the relay's CPU under a flood of small requests.
final class RequestReadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let limit: TimeAmount
    /// By when the request being read must be read in full; nil between requests.
    private var deadline: NIODeadline?
    private var timer: Scheduled<Void>?

    init(limit: TimeAmount) { self.limit = limit }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            let deadline = NIODeadline.now() + limit
            self.deadline = deadline
            if timer == nil { schedule(at: deadline, context: context) }
        case .body:
            break
        case .end:
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    private func schedule(at deadline: NIODeadline, context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.fired(context: context)
        }
    }

    private func fired(context: ChannelHandlerContext) {
        timer = nil
        guard let deadline else { return }
        if deadline <= .now() {
            context.channel.close(promise: nil)
        } else {
            schedule(at: deadline, context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        deadline = nil
        context.fireChannelInactive()
    }
}
