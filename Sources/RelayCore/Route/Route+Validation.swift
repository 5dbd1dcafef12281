extension Route {
    static let reservedKeys: Set<String> = ["from", "message_type", "notification"]
    static let maxTTLSeconds = 2_419_200  // four weeks, FCM's maximum
    static let urgencies: Set<String> = ["very-low", "low", "normal", "high"]

    static func target(_ definition: RouteDefinition) throws(RouteError) -> FCMMessage.Target {
        switch (definition.topic, definition.condition) {
        case (let topic?, nil):
            if topic.hasPrefix("/topics/") {
                throw RouteError(
                    key: "topic", problem: "'\(topic)' has the legacy /topics/ prefix",
                    fix: "write the bare name, '\(topic.dropFirst("/topics/".count))'")
            }
            guard TopicRules.isValidTopic(topic) else {
                throw RouteError(
                    key: "topic", problem: "'\(topic)' is not a valid FCM topic name",
                    fix: "use 1 to 900 characters from a-z A-Z 0-9 - _ . ~ %")
            }
            return .topic(topic)
        case (nil, let condition?):
            let topics: [String]
            do {
                topics = try TopicRules.conditionTopics(condition)
            } catch {
                throw RouteError(
                    key: "condition", problem: "\(error) in \"\(condition)\"",
                    fix: "write conditions like \"'a' in topics && ('b' in topics || 'c' in topics)\"")
            }
            guard topics.count <= TopicRules.maxConditionTopics else {
                throw RouteError(
                    key: "condition", problem: "it names \(topics.count) topics; FCM allows at most 5",
                    fix: "split it into several routes")
            }
            return .condition(condition)
        case (nil, nil):
            throw RouteError(key: "topic", problem: "the route has no target", fix: "set either topic or condition")
        case (.some, .some):
            throw RouteError(
                key: "condition", problem: "the route sets both topic and condition",
                fix: "keep exactly one of them")
        }
    }

    static func data(_ values: [String: DataValue]) throws(RouteError) -> [(key: String, value: DataTemplate)] {
        var out: [(key: String, value: DataTemplate)] = []
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            let lower = key.lowercased()
            if key.isEmpty || reservedKeys.contains(lower) || lower.hasPrefix("google") || lower.hasPrefix("gcm") {
                throw RouteError(
                    key: "data.\(key)", problem: "'\(key)' is a key FCM reserves",
                    fix: "rename it; FCM reserves from, message_type, notification and keys starting with google or gcm")
            }
            switch value {
            case .notString("a list or map"):
                throw RouteError(
                    key: "data.\(key)", problem: "the value is a YAML list or map (an unquoted {{…}} is one)",
                    fix: "quote it: \(key): \"{{version}}\"")
            case .notString(let shown):
                throw RouteError(
                    key: "data.\(key)", problem: "the value \(shown) is not a string; FCM data values are strings",
                    fix: "quote it: \(key): \"\(shown)\"")
            case .string(let text):
                do {
                    out.append((key, try DataTemplate(text)))
                } catch {
                    throw RouteError(key: "data.\(key)", problem: error.problem, fix: error.fix)
                }
            }
        }
        return out
    }

    /// Entries a `when.changed` list or an `audience` map may hold, and the longest name or pattern.
    static let maximumChangeEntries = 200
    static let maximumNameLength = 256

    static func changeRule(_ changed: RouteDefinition.Changed?) throws(RouteError) -> ChangeRule? {
        guard let changed else { return nil }
        let parameters = changed.parameters ?? []
        let conditions = changed.conditions ?? []
        guard !parameters.isEmpty || !conditions.isEmpty else {
            throw RouteError(
                key: "when.changed", problem: "it names no parameter and no condition, so the route would never fire",
                fix: "list parameters (names or globs such as 'checkout_*') or conditions, or remove when.changed")
        }
        for (key, names) in [("when.changed.parameters", parameters), ("when.changed.conditions", conditions)] {
            guard names.count <= maximumChangeEntries else {
                throw RouteError(key: key, problem: "it lists \(names.count) entries", fix: "use at most \(maximumChangeEntries); a glob covers many")
            }
            if let bad = names.first(where: { $0.isEmpty || $0.count > maximumNameLength }) {
                throw RouteError(
                    key: key, problem: bad.isEmpty ? "an entry is empty" : "an entry is longer than \(maximumNameLength) characters",
                    fix: "write the name as Remote Config shows it")
            }
        }
        return ChangeRule(parameters: parameters, conditions: conditions)
    }

    static func audience(_ map: [String: String]?) throws(RouteError) -> [String: String] {
        guard let map else { return [:] }
        guard map.count <= maximumChangeEntries else {
            throw RouteError(key: "audience", problem: "it maps \(map.count) conditions", fix: "map at most \(maximumChangeEntries)")
        }
        for (condition, topic) in map.sorted(by: { $0.key < $1.key }) {
            guard !condition.isEmpty, condition.count <= maximumNameLength else {
                throw RouteError(key: "audience", problem: "a condition name is empty or too long", fix: "write the name as Remote Config shows it")
            }
            guard TopicRules.isValidTopic(topic) else {
                throw RouteError(
                    key: "audience.\(condition.prefix(100))", problem: "'\(topic.prefix(100))' is not a valid FCM topic name",
                    fix: "use 1 to 900 characters from a-z A-Z 0-9 - _ . ~ %")
            }
        }
        return map
    }

    static func filter(_ values: [String]?, key: String, known: Set<String>) throws(RouteError) -> Set<String>? {
        guard let values else { return nil }
        for value in values where !known.contains(value) {
            throw RouteError(
                key: key, problem: "'\(value)' is not a known value",
                fix: "use one of " + known.sorted().joined(separator: ", "))
        }
        return Set(values)
    }

    static func android(_ settings: RouteDefinition.Android?) throws(RouteError) -> FCMMessage.Android {
        let priority = (settings?.priority ?? "normal").lowercased()
        guard priority == "normal" || priority == "high" else {
            throw RouteError(
                key: "android.priority", problem: "'\(priority)' is not an Android priority",
                fix: "use normal (right for config pings) or high")
        }
        let ttl = try ttlSeconds(settings?.ttlSeconds, key: "android.ttlSeconds")
        let collapseKey = settings?.collapseKey ?? "rc-stale"
        guard !collapseKey.isEmpty else {
            throw RouteError(key: "android.collapseKey", problem: "it is empty", fix: "use one key for all config pings")
        }
        return .init(priority: priority, collapse_key: collapseKey, ttl: "\(ttl)s")
    }

    static func apns(_ settings: RouteDefinition.APNs?) throws(RouteError) -> FCMMessage.APNs {
        let collapseID = settings?.collapseId ?? "rc-stale"
        guard (1...64).contains(collapseID.utf8.count) else {
            throw RouteError(
                key: "apns.collapseId", problem: "it is \(collapseID.utf8.count) bytes; APNs allows 1 to 64",
                fix: "use a short id such as rc-stale")
        }
        return .init(
            headers: ["apns-push-type": "background", "apns-priority": "5", "apns-collapse-id": collapseID],
            payload: .init(aps: .init()))
    }

    static func webpush(_ settings: RouteDefinition.WebPush?) throws(RouteError) -> FCMMessage.WebPush {
        let urgency = settings?.urgency ?? "low"
        guard urgencies.contains(urgency) else {
            throw RouteError(
                key: "webpush.urgency", problem: "'\(urgency)' is not a Web Push urgency",
                fix: "use one of very-low, low, normal, high")
        }
        let ttl = try ttlSeconds(settings?.ttlSeconds, key: "webpush.ttlSeconds")
        return .init(headers: ["TTL": String(ttl), "Urgency": urgency])
    }

    static func ttlSeconds(_ value: Int?, key: String) throws(RouteError) -> Int {
        let ttl = value ?? 86_400
        guard (0...maxTTLSeconds).contains(ttl) else {
            throw RouteError(
                key: key, problem: "\(ttl) is outside 0 to \(maxTTLSeconds) seconds (four weeks)",
                fix: "use a TTL within FCM's range; 86400 (a day) suits config pings")
        }
        return ttl
    }

    /// The longest quiet period: the webhook's sender is answered at once, but the ping waits this long at most.
    static let maximumDebounceSeconds = 3600
    /// The longest wave.
    static let maximumSpreadSeconds = 86_400

    static func debounce(_ seconds: Int?) throws(RouteError) -> Int {
        let seconds = seconds ?? 0
        guard (0...maximumDebounceSeconds).contains(seconds) else {
            throw RouteError(
                key: "debounceSeconds", problem: "\(seconds) is outside 0 to \(maximumDebounceSeconds) seconds",
                fix: "use a quiet period of a few minutes at most, such as 60; 0 sends at once")
        }
        return seconds
    }

    static func waves(_ definition: RouteDefinition) throws(RouteError) -> Waves? {
        guard let waves = definition.waves else { return nil }
        if definition.topic != nil || definition.condition != nil {
            throw RouteError(
                key: "waves", problem: "the route sets \(definition.topic != nil ? "topic" : "condition") and waves",
                fix: "drop it: a waved route sends to its shard topics (waves.topic) and nowhere else")
        }
        let shards = waves.shards ?? 0
        guard (1...Waves.maximumShards).contains(shards) else {
            throw RouteError(
                key: "waves.shards", problem: "\(shards) is outside 1 to \(Waves.maximumShards)",
                fix: "use 10 to 20 shards; each app subscribes to one shard topic")
        }
        let spread = waves.spreadSeconds ?? 0
        guard (1...maximumSpreadSeconds).contains(spread) else {
            throw RouteError(
                key: "waves.spreadSeconds", problem: "\(spread) is outside 1 to \(maximumSpreadSeconds) seconds",
                fix: "use a spread of a few minutes, such as 600")
        }
        let ttl = min(
            try ttlSeconds(definition.android?.ttlSeconds, key: "android.ttlSeconds"),
            try ttlSeconds(definition.webpush?.ttlSeconds, key: "webpush.ttlSeconds"))
        guard spread <= ttl else {
            throw RouteError(
                key: "waves.spreadSeconds", problem: "the spread (\(spread) s) is longer than the message TTL (\(ttl) s)",
                fix: "shorten the spread or raise android.ttlSeconds and webpush.ttlSeconds above it")
        }
        guard let pattern = waves.topic, pattern.components(separatedBy: Waves.placeholder).count == 2 else {
            throw RouteError(
                key: "waves.topic",
                problem: waves.topic == nil ? "it is missing" : "'\(waves.topic!.prefix(100))' does not hold {shard} exactly once",
                fix: "name the shard topics with one {shard}, such as PUSH_RC_{shard}")
        }
        let wave = Waves(shards: shards, spreadSeconds: spread, topicPattern: pattern)
        let longest = wave.topic(shard: shards - 1)
        guard !pattern.hasPrefix("/topics/"), TopicRules.isValidTopic(longest) else {
            throw RouteError(
                key: "waves.topic", problem: "'\(longest.prefix(100))' is not a valid FCM topic name",
                fix: "use 1 to 900 characters from a-z A-Z 0-9 - _ . ~ % around {shard}, such as PUSH_RC_{shard}")
        }
        return wave
    }
}
