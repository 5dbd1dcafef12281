import AsyncHTTPClient
import Foundation
import Logging
import NIOCore

/// Sends one encoded message through FCM HTTP v1 `messages:send`.
public struct FCMSender: Sendable {
    let httpClient: HTTPClient
    let baseURL: String
    let tokenSource: any AccessTokenSource
    let timeout: TimeAmount

    /// `baseURL` is `https://fcm.googleapis.com` in production; tests and the emulator point it elsewhere.
    public init(
        httpClient: HTTPClient, baseURL: String, tokenSource: any AccessTokenSource, timeout: Duration = .seconds(10)
    ) {
        self.httpClient = httpClient
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.tokenSource = tokenSource
        self.timeout = .seconds(timeout.components.seconds)
    }

    /// Sends `message` (the JSON of FCM's `message` object) and returns FCM's message name.
    ///
    /// A 401 means the cached token went bad early: it is dropped and the send is tried once more. `beforeRequest` is
    /// asked right before each request leaves, once the token is in hand (which may take a token exchange of up to
    /// the timeout): a reason ends the send with ``FCMError/withheld(_:)`` and nothing leaves.
    public func send(
        project: String, message: ByteBuffer, validateOnly: Bool, beforeRequest: @Sendable () async -> String? = { nil }
    ) async throws(FCMError) -> String {
        // Sized once for the envelope around the message (33 bytes at most), not grown as it is written.
        var body = ByteBufferAllocator().buffer(capacity: message.readableBytes + 33)
        body.writeString(#"{"message":"#)
        body.writeImmutableBuffer(message)
        body.writeString(validateOnly ? #","validate_only":true}"# : "}")
        do {
            return try await attempt(project: project, body: body, beforeRequest: beforeRequest)
        } catch .rejected(let response) where response.httpStatus == 401 && response.errorCode == nil {
            return try await attempt(project: project, body: body, beforeRequest: beforeRequest)
        }
    }

    private func attempt(project: String, body: ByteBuffer, beforeRequest: @Sendable () async -> String?) async throws(FCMError) -> String {
        let token: AccessToken
        do {
            token = try await tokenSource.token()
        } catch {
            throw .token(error)
        }
        if let reason = await beforeRequest() { throw .withheld(reason) }
        var request = HTTPClientRequest(url: "\(baseURL)/v1/projects/\(project)/messages:send")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token.value)")
        request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        request.body = .bytes(body)
        let status: Int
        let retryAfter: String?
        let responseBody: ByteBuffer
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "Retry-After")
            responseBody = try await response.body.collect(upTo: 256 * 1024)
        } catch {
            throw .transport("\(error)")
        }
        if status == 200 {
            guard let name = Self.messageName(in: responseBody) else { throw .invalidResponse("no message name") }
            return name
        }
        if status == 401 { await tokenSource.invalidate(token) }
        throw .rejected(Self.errorResponse(status: status, retryAfter: retryAfter, body: responseBody))
    }

    private struct Sent: Decodable { var name: String }

    /// The message name in FCM's answer to a send. FCM answers `{"name": "projects/…/messages/…"}` (with white space
    /// around, and `\/` for `/` from some writers, the emulator's among them), which is read in place; anything else
    /// (another member, a `\u` escape) goes to `JSONDecoder`. The decoder was 3 µs of a webhook's CPU (issue #35's
    /// profile).
    static func messageName(in body: ByteBuffer) -> String? {
        if let name = body.withUnsafeReadableBytes({ simpleMessageName(in: $0) }) { return name }
        return (try? JSONDecoder().decode(Sent.self, from: Data(body.readableBytesView)))?.name
    }

    /// `{"name":"…"}` with optional white space, a name with no control character and no escape but JSON's
    /// one-character ones; nil for any other text.
    static func simpleMessageName(in bytes: UnsafeRawBufferPointer) -> String? {
        var index = 0
        func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }
        func expect(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return false }
            index += count
            return true
        }
        skipSpace()
        guard expect("{") else { return nil }
        skipSpace()
        guard expect(#""name""#) else { return nil }
        skipSpace()
        guard expect(":") else { return nil }
        skipSpace()
        guard expect(#"""#) else { return nil }
        var name: [UInt8] = []
        name.reserveCapacity(64)
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] >= 0x20 {
            guard bytes[index] == UInt8(ascii: "\\") else {
                name.append(bytes[index])
                index += 1
                continue
            }
            guard index + 1 < bytes.count, let unescaped = Self.unescaped[bytes[index + 1]] else { return nil }
            name.append(unescaped)
            index += 2
        }
        guard expect(#"""#) else { return nil }
        skipSpace()
        guard expect("}") else { return nil }
        skipSpace()
        guard index == bytes.count else { return nil }
        // Not valid UTF-8: JSONDecoder decides (it refuses it).
        return String(validating: name, as: UTF8.self)
    }

    /// JSON's one-character escapes: the byte after the backslash, and what it stands for.
    private static let unescaped: [UInt8: UInt8] = [
        UInt8(ascii: "\""): UInt8(ascii: "\""), UInt8(ascii: "\\"): UInt8(ascii: "\\"), UInt8(ascii: "/"): UInt8(ascii: "/"),
        UInt8(ascii: "b"): 0x08, UInt8(ascii: "f"): 0x0C, UInt8(ascii: "n"): 0x0A, UInt8(ascii: "r"): 0x0D, UInt8(ascii: "t"): 0x09,
    ]

    private struct GoogleError: Decodable {
        struct Body: Decodable {
            var message: String?
            var status: String?
            var details: [Detail]?
        }
        struct Detail: Decodable {
            var type: String?
            var errorCode: String?
            enum CodingKeys: String, CodingKey {
                case type = "@type"
                case errorCode
            }
        }
        var error: Body
    }

    static func errorResponse(status: Int, retryAfter: String?, body: ByteBuffer) -> FCMErrorResponse {
        let decoded = try? JSONDecoder().decode(GoogleError.self, from: Data(body.readableBytesView))
        let fcmCode = decoded?.error.details?.first { $0.type?.hasSuffix("FcmError") == true }?.errorCode
        return FCMErrorResponse(
            httpStatus: status, status: decoded?.error.status, errorCode: fcmCode, message: decoded?.error.message,
            retryAfter: retryAfter)
    }
}
