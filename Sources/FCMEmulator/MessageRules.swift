import Foundation

/// The checks FCM makes on a `messages:send` request beyond its schema (which ``DiscoveryDocument/check(_:against:)``
/// makes from `fcm.v1.json`), written from FCM's published rules. Each failure is the message of an
/// `INVALID_ARGUMENT` answer.
enum MessageRules {
    static let maxTTLSeconds = 2_419_200.0
    static let targets = ["token", "topic", "condition", "fid"]
    static let invalidToken = "The registration token is not a valid FCM registration token"

    static func topicIsValid(_ topic: String) -> Bool {
        topic.range(of: "^[a-zA-Z0-9\\-_.~%]{1,900}$", options: .regularExpression) != nil
    }

    /// A Firebase installation ID: 22 characters of URL-safe base64 whose first four bits are `0111`.
    static func isInstallationID(_ text: String) -> Bool {
        text.range(of: "^[cdef][A-Za-z0-9_-]{21}$", options: .regularExpression) != nil
    }

    /// What `token` takes: a registration token (an instance or installation ID of 11 to 22 characters, a colon, and
    /// at least 20 more: `bk3RNwTe3H0:CI2k_HH…`, `<installation ID>:APA91b…`; or the oldest, `APA91b…` alone, at least
    /// 20 characters after the prefix), or during FCM's transition an installation ID. URL-safe base64 throughout.
    static func isRegistrationToken(_ text: String) -> Bool {
        isInstallationID(text)
            || text.range(of: "^([A-Za-z0-9_-]{11,22}:[A-Za-z0-9_-]{20,4096}|APA91b[A-Za-z0-9_-]{20,4096})$", options: .regularExpression) != nil
    }

    /// Checks a request its schema allows; returns the message to answer with, or nil when FCM would accept it.
    static func problem(in request: JSONValue) -> String? {
        guard let message = request["message"], message.members != nil else { return "Message is required." }
        let targets = targets.filter { message[$0] != nil && message[$0] != .null }
        guard targets.count == 1 else { return "Exactly one of token, topic, condition or fid must be specified." }
        var limit = 4096
        if let topic = message["topic"] {
            guard let topic = topic.string, topicIsValid(topic) else { return "Invalid topic name." }
            limit = 2048
        }
        if let condition = message["condition"] {
            guard let condition = condition.string, let count = ConditionRules.topicCount(condition) else {
                return "Invalid condition expression."
            }
            guard count <= 5 else { return "Condition can have at most 5 topics." }
            limit = 2048
        }
        if let token = message["token"], !isRegistrationToken(token.string ?? "") { return invalidToken }
        if let fid = message["fid"], !isInstallationID(fid.string ?? "") { return "Invalid Firebase installation ID." }
        if message["android"] != nil, message["androidV2", "android_v2"] != nil {
            return "Message cannot have both android and android_v2."
        }
        if let problem = dataProblem(message["data"], limit: limit) { return problem }
        if let problem = dataProblem(message["android"]?["data"], limit: limit) { return problem }
        for android in [message["android"], message["androidV2", "android_v2"]].compactMap({ $0 }) {
            if let problem = androidProblem(android) { return problem }
        }
        if let apns = message["apns"], let problem = apnsProblem(apns) { return problem }
        if let webpush = message["webpush"], let problem = webpushProblem(webpush) { return problem }
        return nil
    }

    /// The target a recorded message went to (`token`, `fid`), for the emulator's unregistered tokens.
    static func device(in request: JSONValue) -> String? {
        request["message"].flatMap { $0["token"]?.string ?? $0["fid"]?.string }
    }

    static func dataProblem(_ data: JSONValue?, limit: Int) -> String? {
        guard let members = data?.members else { return nil }
        var size = 0
        for (key, value) in members {
            let lower = key.lowercased()
            if ["from", "message_type", "notification"].contains(lower) || lower.hasPrefix("google") || lower.hasPrefix("gcm") {
                return "Invalid data payload key: \(key)"
            }
            size += key.utf8.count + (value.string?.utf8.count ?? 0)
        }
        return size > limit ? "Message is too big: data payload is \(size) bytes, the limit is \(limit)." : nil
    }

    static func androidProblem(_ android: JSONValue) -> String? {
        if let ttl = android["ttl"]?.string, let seconds = Double(ttl.dropLast()), seconds < 0 || seconds > maxTTLSeconds {
            return "Invalid value at 'ttl': a TTL is between 0 and 4 weeks."
        }
        return nil
    }

    /// APNs rules FCM passes on: a background push must be priority 5 with content-available only.
    static func apnsProblem(_ apns: JSONValue) -> String? {
        let headers = apns["headers"]
        if let collapse = headers?["apns-collapse-id"]?.string, collapse.utf8.count > 64 {
            return "Invalid APNs collapse id: more than 64 bytes."
        }
        guard headers?["apns-push-type"]?.string == "background" else { return nil }
        guard headers?["apns-priority"]?.string == "5" else {
            return "Invalid APNs headers: a background push must have apns-priority 5."
        }
        guard let aps = apns["payload"]?["aps"]?.members, aps.count == 1, aps[0].key == "content-available",
            aps[0].value == .number("1") || aps[0].value == .bool(true)
        else { return "Invalid APNs payload: a background push carries aps.content-available = 1 only." }
        return nil
    }

    static func webpushProblem(_ webpush: JSONValue) -> String? {
        let headers = webpush["headers"]
        if let ttl = headers?["TTL"], UInt64(ttl.string ?? "") == nil { return "Invalid WebPush TTL header." }
        if let urgency = headers?["Urgency"], !["very-low", "low", "normal", "high"].contains(urgency.string ?? "") {
            return "Invalid WebPush Urgency header."
        }
        return nil
    }
}
