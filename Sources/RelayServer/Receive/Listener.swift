import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// One HTTP listener: a Hummingbird router behind HummingbirdCore's server, run as Hummingbird's `Application` runs it
/// with two differences. The `Date` header is formatted on a response whose second differs from the last one's, not
/// by a timer every second, so an idle relay has no timer to wake up for (issue #35: a timer per listener was about
/// three thread wake-ups a second). And no request id of Hummingbird's is drawn and set on a copy of the logger per
/// request: the relay's own (`RequestInfo`) is the one its answers and logs carry.
struct Listener: Service {
    let responder: RouterResponder<RelayRequestContext>
    let server: HTTPServerBuilder
    let address: BindAddress
    let serverName: String
    /// Run beside the server, stopped after it (in reverse order).
    var services: [any Service] = []
    let onServerRunning: @Sendable (any Channel) async -> Void
    let logger: Logger

    init(
        router: Router<RelayRequestContext>, server: HTTPServerBuilder, address: BindAddress, serverName: String, services: [any Service] = [],
        onServerRunning: @escaping @Sendable (any Channel) async -> Void, logger: Logger
    ) {
        responder = router.buildResponder()
        (self.server, self.address, self.serverName, self.services, self.onServerRunning, self.logger) =
            (server, address, serverName, services, onServerRunning, logger)
    }

    /// What the responder throws when writing the answer met a parse error: the channel is closed, no second answer.
    struct AnswerNotWritten: Error {}

    func run() async throws {
        let responder = self.responder
        let dates = HTTPDates()
        let (logger, serverName) = (self.logger, self.serverName)
        let server = try server.buildServer(
            configuration: ServerConfiguration(address: address, serverName: serverName), eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            logger: logger
        ) { (request, responseWriter: consuming ResponseWriter, channel) in
            let context = RelayRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
            var response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch let error as HTTPParserError {
                throw error
            } catch {
                logger.debug("unrecognised error", metadata: ["error.type": "\(error)"])
                response = Response(status: .internalServerError, body: .init())
            }
            response.headers[.date] = dates.now()
            response.headers[.server] = serverName
            do {
                try await responseWriter.write(response: response.head, body: response.body)
            } catch is HTTPParserError {
                throw AnswerNotWritten()
            }
        } onServerRunning: {
            await onServerRunning($0)
        }
        try await ServiceGroup(
            configuration: .init(services: (services + [server]).map(ServiceGroupConfiguration.ServiceConfiguration.named), logger: logger)
        ).run()
    }
}

/// The `Date` header's text (RFC 9110), formatted again only when the second has changed since the last answer.
final class HTTPDates: Sendable {
    private let last = NIOLockedValueBox<(second: Int, text: String)>((-1, ""))

    func now() -> String {
        let second = time(nil)
        if let text = last.withLockedValue({ $0.second == second ? $0.text : nil }) { return text }
        let text = Self.format(second)
        last.withLockedValue { $0 = (second, text) }
        return text
    }

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func format(_ second: Int) -> String {
        var seconds = time_t(second)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
