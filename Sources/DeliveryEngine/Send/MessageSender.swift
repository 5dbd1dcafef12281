import FCMClient
import NIOCore

/// The seam between routing and FCM: send one encoded message, get FCM's message name back.
public protocol MessageSender: Sendable {
    func send(project: String, message: ByteBuffer, validateOnly: Bool) async throws(FCMError) -> String
}

extension FCMSender: MessageSender {}
