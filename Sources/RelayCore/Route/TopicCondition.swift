/// FCM topic names and conditions, checked the way FCM documents them.
public enum TopicRules {
    /// FCM allows at most five topics in one condition.
    public static let maxConditionTopics = 5

    /// `[a-zA-Z0-9-_.~%]{1,900}`, without the legacy `/topics/` prefix.
    public static func isValidTopic<S: StringProtocol>(_ topic: S) -> Bool {
        guard (1...900).contains(topic.utf8.count) else { return false }
        return topic.unicodeScalars.allSatisfy { scalar in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "-", "_", ".", "~", "%": true
            default: false
            }
        }
    }

    /// Parses a condition such as `'a' in topics && ('b' in topics || !('c' in topics))`; returns its topics.
    public static func conditionTopics(_ condition: String) throws(ConditionError) -> [String] {
        var parser = ConditionParser(Array(condition.unicodeScalars))
        try parser.expression()
        parser.skipSpaces()
        guard parser.atEnd else { throw .unexpected(at: parser.position) }
        return parser.topics
    }
}

/// Why a condition does not parse.
public enum ConditionError: Error, Equatable, Sendable, CustomStringConvertible {
    case unexpected(at: Int)
    case invalidTopic(String)
    case tooDeep

    public var description: String {
        switch self {
        case .unexpected(let at): "syntax error at character \(at + 1)"
        case .invalidTopic(let topic): "'\(topic.prefix(100))' is not a valid topic name"
        case .tooDeep: "'!' and parentheses nest deeper than 32"
        }
    }
}

/// expression := term (('&&' | '||') term)* ; term := '!' term | '(' expression ')' | quoted-topic 'in' 'topics'
private struct ConditionParser {
    let text: [Unicode.Scalar]
    var position = 0
    var topics: [String] = []
    /// How deep `!` and parentheses nest at most: a condition has five topics, and recursion must not meet the stack's end.
    static let maximumDepth = 32
    var depth = 0

    init(_ text: [Unicode.Scalar]) { self.text = text }

    var atEnd: Bool { position >= text.count }

    mutating func expression() throws(ConditionError) {
        try term()
        while true {
            skipSpaces()
            guard consume("&&") || consume("||") else { return }
            try term()
        }
    }

    mutating func term() throws(ConditionError) {
        skipSpaces()
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { throw .tooDeep }
        if consume("!") { return try term() }
        if consume("(") {
            try expression()
            skipSpaces()
            guard consume(")") else { throw .unexpected(at: position) }
            return
        }
        guard !atEnd, text[position] == "'" || text[position] == "\"" else { throw .unexpected(at: position) }
        let quote = text[position]
        position += 1
        let start = position
        while !atEnd, text[position] != quote { position += 1 }
        guard !atEnd else { throw .unexpected(at: position) }
        var topic = String.UnicodeScalarView()
        topic.append(contentsOf: text[start..<position])
        position += 1
        guard TopicRules.isValidTopic(String(topic)) else { throw .invalidTopic(String(topic)) }
        topics.append(String(topic))
        skipSpaces()
        guard consume("in") else { throw .unexpected(at: position) }
        guard !atEnd, text[position] == " " || text[position] == "\t" else { throw .unexpected(at: position) }
        skipSpaces()
        guard consume("topics") else { throw .unexpected(at: position) }
    }

    mutating func skipSpaces() {
        while !atEnd, text[position] == " " || text[position] == "\t" { position += 1 }
    }

    mutating func consume(_ token: String) -> Bool {
        let scalars = Array(token.unicodeScalars)
        guard position + scalars.count <= text.count, Array(text[position..<position + scalars.count]) == scalars
        else { return false }
        position += scalars.count
        return true
    }
}
