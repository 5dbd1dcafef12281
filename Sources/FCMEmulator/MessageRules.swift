import Foundation

/// The checks FCM makes on a `messages:send` body, written from FCM's published rules.
/// Each failure is the message of an `INVALID_ARGUMENT` answer.
enum MessageRules {
    static let requestFields: Set<String> = ["message", "validate_only", "validateOnly"]
    static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic",
        "condition",
    ]
    static let androidFields: Set<String> = [
        "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data",
        "notification", "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk",
    ]
    static let maxTTLSeconds = 2_419_200.0

    static func topicIsValid(_ topic: String) -> Bool {
        topic.range(of: "^[a-zA-Z0-9\\-_.~%]{1,900}$", options: .regularExpression) != nil
    }

    /// Checks a parsed request body; returns the message to answer with, or nil when FCM would accept it.
    static func problem(in request: [String: Any]) -> String? {
        if let unknown = request.keys.first(where: { !requestFields.contains($0) }) {
            return "Invalid JSON payload received. Unknown name \"\(unknown)\": Cannot find field."
        }
        guard let message = request["message"] as? [String: Any] else { return "Message is required." }
        if let unknown = message.keys.first(where: { !messageFields.contains($0) }) {
            return "Invalid JSON payload received. Unknown name \"\(unknown)\" at 'message': Cannot find field."
        }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1 else { return "Exactly one of token, topic or condition must be specified." }
        var limit = 4096
        if let topic = message["topic"] {
            guard let topic = topic as? String, topicIsValid(topic) else { return "Invalid topic name." }
            limit = 2048
        }
        if let condition = message["condition"] {
            guard let condition = condition as? String, let count = ConditionRules.topicCount(condition) else {
                return "Invalid condition expression."
            }
            guard count <= 5 else { return "Condition can have at most 5 topics." }
            limit = 2048
        }
        if let token = message["token"], (token as? String)?.isEmpty != false { return "Invalid registration token." }
        if let problem = dataProblem(message["data"], limit: limit) { return problem }
        if let android = message["android"], let problem = androidProblem(android) { return problem }
        if let apns = message["apns"], let problem = apnsProblem(apns) { return problem }
        if let webpush = message["webpush"], let problem = webpushProblem(webpush) { return problem }
        return nil
    }

    static func dataProblem(_ data: Any?, limit: Int) -> String? {
        guard let data else { return nil }
        guard let map = data as? [String: Any] else { return "Invalid value at 'message.data': expected a map." }
        var size = 0
        for (key, value) in map {
            guard let text = value as? String else {
                return "Invalid value at 'message.data[\(key)].value' (TYPE_STRING)"
            }
            let lower = key.lowercased()
            if ["from", "message_type", "notification"].contains(lower) || lower.hasPrefix("google") || lower.hasPrefix("gcm") {
                return "Invalid data payload key: \(key)"
            }
            size += key.utf8.count + text.utf8.count
        }
        return size > limit ? "Message is too big: data payload is \(size) bytes, the limit is \(limit)." : nil
    }

    static func androidProblem(_ value: Any) -> String? {
        guard let android = value as? [String: Any] else { return "Invalid value at 'message.android'." }
        if let unknown = android.keys.first(where: { !androidFields.contains($0) }) {
            return "Invalid JSON payload received. Unknown name \"\(unknown)\" at 'message.android': Cannot find field."
        }
        if let priority = android["priority"] {
            guard let text = priority as? String, ["NORMAL", "HIGH"].contains(text.uppercased()) else {
                return "Invalid value at 'message.android.priority'."
            }
        }
        if let ttl = android["ttl"] {
            guard let text = ttl as? String, text.range(of: "^[0-9]+(\\.[0-9]{1,9})?s$", options: .regularExpression) != nil,
                let seconds = Double(text.dropLast()), seconds <= maxTTLSeconds
            else { return "Invalid value at 'message.android.ttl' (google.protobuf.Duration)." }
        }
        return nil
    }

    /// APNs rules FCM passes on: string headers; a background push must be priority 5 with content-available only.
    static func apnsProblem(_ value: Any) -> String? {
        guard let apns = value as? [String: Any] else { return "Invalid value at 'message.apns'." }
        let headers = apns["headers"] as? [String: Any] ?? [:]
        guard headers.values.allSatisfy({ $0 is String }) else { return "Invalid value at 'message.apns.headers'." }
        if let collapse = headers["apns-collapse-id"] as? String, collapse.utf8.count > 64 {
            return "Invalid APNs collapse id: more than 64 bytes."
        }
        let aps = (apns["payload"] as? [String: Any])?["aps"] as? [String: Any]
        if headers["apns-push-type"] as? String == "background" {
            guard headers["apns-priority"] as? String == "5" else {
                return "Invalid APNs headers: a background push must have apns-priority 5."
            }
            guard let aps, aps.count == 1, (aps["content-available"] as? NSNumber)?.intValue == 1 else {
                return "Invalid APNs payload: a background push carries aps.content-available = 1 only."
            }
        }
        return nil
    }

    static func webpushProblem(_ value: Any) -> String? {
        guard let webpush = value as? [String: Any] else { return "Invalid value at 'message.webpush'." }
        let headers = webpush["headers"] as? [String: Any] ?? [:]
        if let ttl = headers["TTL"] {
            guard let text = ttl as? String, UInt64(text) != nil else { return "Invalid WebPush TTL header." }
        }
        if let urgency = headers["Urgency"] {
            guard let text = urgency as? String, ["very-low", "low", "normal", "high"].contains(text) else {
                return "Invalid WebPush Urgency header."
            }
        }
        return nil
    }
}
