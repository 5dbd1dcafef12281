import FCMClient
import Foundation
import Logging
import NIOCore
import RelayCore

/// Sends an event's pings to FCM in parallel and reports each outcome, in route order.
struct Dispatcher: Sendable {
    let sender: any MessageSender
    let validateOnly: Bool
    /// Log every message's JSON at info (the development profile shows what it "sent").
    let logPings: Bool

    private static let encoder = JSONEncoder()

    func deliver(_ pings: [Ping], logger: Logger) async -> [DeliveryReport] {
        await withTaskGroup(of: (Int, DeliveryReport).self) { group in
            for (index, ping) in pings.enumerated() {
                group.addTask { (index, await deliver(ping, logger: logger)) }
            }
            var reports = [DeliveryReport?](repeating: nil, count: pings.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    private func deliver(_ ping: Ping, logger: Logger) async -> DeliveryReport {
        var logger = logger
        logger[metadataKey: "route"] = "\(ping.route)"
        let body: Data
        do {
            body = try Self.encoder.encode(ping.message)
        } catch {
            return DeliveryReport(route: ping.route, failure: .invalidResponse("the message could not be encoded"))
        }
        if logPings {
            logger.info("ping", metadata: ["message": "\(String(decoding: body, as: UTF8.self))"])
        }
        do {
            let name = try await sender.send(project: ping.project, message: ByteBuffer(bytes: body), validateOnly: validateOnly)
            logger.info(validateOnly ? "ping validated by FCM" : "ping accepted by FCM", metadata: ["fcm_message": "\(name)"])
            return DeliveryReport(route: ping.route, messageName: name, validated: validateOnly)
        } catch {
            logger.error("ping failed", metadata: ["error": "\(error)"])
            return DeliveryReport(route: ping.route, failure: error)
        }
    }
}
