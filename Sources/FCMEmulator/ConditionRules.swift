/// FCM's condition language, checked independently of the relay: tokens, then a shunting-yard pass.
enum ConditionRules {
    enum Token: Equatable {
        case topic(String), andOp, orOp, notOp, open, close
    }

    /// The number of topics in a valid condition, or nil if it does not parse.
    static func topicCount(_ condition: String) -> Int? {
        guard let tokens = tokenize(condition), !tokens.isEmpty else { return nil }
        // Walk the tokens checking that operands and binary operators alternate and parentheses balance.
        var expectOperand = true
        var depth = 0
        var topics = 0
        for token in tokens {
            switch token {
            case .topic:
                guard expectOperand else { return nil }
                topics += 1
                expectOperand = false
            case .notOp, .open:
                guard expectOperand else { return nil }
                if token == .open { depth += 1 }
            case .close:
                guard !expectOperand, depth > 0 else { return nil }
                depth -= 1
            case .andOp, .orOp:
                guard !expectOperand else { return nil }
                expectOperand = true
            }
        }
        return !expectOperand && depth == 0 ? topics : nil
    }

    static func tokenize(_ text: String) -> [Token]? {
        var tokens: [Token] = []
        var chars = Substring(text)
        while let first = chars.first {
            if first == " " || first == "\t" {
                chars.removeFirst()
            } else if chars.hasPrefix("&&") {
                tokens.append(.andOp)
                chars.removeFirst(2)
            } else if chars.hasPrefix("||") {
                tokens.append(.orOp)
                chars.removeFirst(2)
            } else if first == "!" {
                tokens.append(.notOp)
                chars.removeFirst()
            } else if first == "(" {
                tokens.append(.open)
                chars.removeFirst()
            } else if first == ")" {
                tokens.append(.close)
                chars.removeFirst()
            } else if first == "'" || first == "\"" {
                chars.removeFirst()
                guard let end = chars.firstIndex(of: first) else { return nil }
                let name = String(chars[..<end])
                guard MessageRules.topicIsValid(name) else { return nil }
                chars = chars[chars.index(after: end)...]
                // Then exactly: whitespace, "in", whitespace, "topics".
                let rest = chars.drop { $0 == " " || $0 == "\t" }
                guard rest.hasPrefix("in"), rest.count > 2 else { return nil }
                let afterIn = rest.dropFirst(2)
                guard afterIn.first == " " || afterIn.first == "\t" else { return nil }
                let topicsWord = afterIn.drop { $0 == " " || $0 == "\t" }
                guard topicsWord.hasPrefix("topics") else { return nil }
                chars = topicsWord.dropFirst(6)
                tokens.append(.topic(name))
            } else {
                return nil
            }
        }
        return tokens
    }
}
