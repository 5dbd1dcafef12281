import Foundation

/// A publish notice in each target's format: a Standard Webhooks event, a Slack message with blocks, a Google Chat
/// message with a card. The words are the same in both chats (``headline``, ``changeLines``).
extension PublishNotice {
    /// The standard event's `type`.
    public static let eventType = "remoteconfig.template.updated"
    /// Names listed per kind of change at most; the rest are counted.
    static let listed = 20

    public func body(_ format: HTTPTarget.Format) -> [UInt8] { Self.encode(message(format)) }

    /// The body before it is encoded (for `POST /admin/preview`'s answer, which holds it as an object).
    public func message(_ format: HTTPTarget.Format) -> any Encodable & Sendable {
        switch format {
        case .standard: StandardEvent(type: Self.eventType, timestamp: updateTime, data: self)
        case .slack: slack
        case .googleChat: googleChat
        }
    }

    struct StandardEvent: Encodable, Sendable {
        var type: String
        var timestamp: String?
        var data: PublishNotice
    }

    private static func encode(_ value: any Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? Array(encoder.encode(value))) ?? Array("{}".utf8)
    }

    /// `release@example.com published version 212 of demo-project`, or `… rolled demo-project back to version 200
    /// (now version 212)`.
    public var headline: String {
        let who = updateUser?.email ?? updateUser?.name ?? "Someone"
        if updateType == "ROLLBACK", let rollbackSource {
            return "\(who) rolled \(project) back to version \(rollbackSource) (now version \(versionNumber))"
        }
        return "\(who) published version \(versionNumber) of \(project)"
    }

    /// What changed, a line per kind: `Changed: welcome_banner (for lang_ja)`, `Added: …`, or why it is unknown.
    public var changeLines: [String] {
        guard let change else { return [] }
        guard change.known else { return ["What changed is unknown: \(change.reason ?? "no template")."] }
        var lines: [String] = []
        func line(_ title: String, _ names: [String]) {
            guard !names.isEmpty else { return }
            let shown = names.prefix(Self.listed).joined(separator: ", ")
            lines.append("\(title): \(shown)" + (names.count > Self.listed ? " and \(names.count - Self.listed) more" : ""))
        }
        line("Changed", change.parameters("changed").map(Self.describe))
        line("Added", change.parameters("added").map(\.name))
        line("Removed", change.parameters("removed").map(\.name))
        line("Conditions changed", change.conditions.filter { $0.kind == "changed" }.map(\.name))
        line("Conditions added", change.conditions.filter { $0.kind == "added" }.map(\.name))
        line("Conditions removed", change.conditions.filter { $0.kind == "removed" }.map(\.name))
        if change.conditionsReordered { lines.append("Conditions were re-ordered.") }
        if lines.isEmpty { lines.append("No parameter or condition changed.") }
        return lines
    }

    /// `name (for lang_ja)`, `name (default value)`, `name (value type, for ios)`.
    static func describe(_ parameter: ChangeSummary.Parameter) -> String {
        var what: [String] = []
        if parameter.defaultChanged { what.append("default value") }
        if parameter.valueTypeChanged { what.append("value type") }
        if !parameter.conditions.isEmpty { what.append("for " + parameter.conditions.prefix(5).joined(separator: ", ")) }
        return what.isEmpty ? parameter.name : "\(parameter.name) (\(what.joined(separator: ", ")))"
    }

    /// `Pinged: topic:PUSH_RC`, or that no FCM route pinged.
    public var audienceLine: String {
        audiences.isEmpty ? "No FCM ping for this version." : "Pinged: " + audiences.prefix(Self.listed).joined(separator: ", ")
    }

    /// One line for notifications and clients that show no blocks or cards.
    public var summary: String { ([headline] + changeLines.prefix(1)).joined(separator: ": ") }
}

// MARK: - Slack

extension PublishNotice {
    struct SlackText: Encodable, Sendable {
        var type: String
        var text: String
    }

    struct SlackBlock: Encodable, Sendable {
        var type: String
        var text: SlackText?
        var elements: [SlackText]?
    }

    struct SlackMessage: Encodable, Sendable {
        var text: String
        var blocks: [SlackBlock]
    }

    /// An incoming-webhook message: a header, who and how, the change, and the audiences pinged (as context).
    var slack: SlackMessage {
        var blocks = [
            SlackBlock(type: "header", text: SlackText(type: "plain_text", text: Self.cut(headline, 150))),
            SlackBlock(
                type: "section",
                text: SlackText(
                    type: "mrkdwn",
                    text: Self.cut(
                        Self.slackEscaped(
                            "\(project) · version \(versionNumber) · \(updateType ?? "update") from \(updateOrigin ?? "an unknown origin")")
                            + (description.flatMap { $0.isEmpty ? nil : "\n> " + Self.slackEscaped($0) } ?? ""), 3000))),
        ]
        let lines = changeLines
        if !lines.isEmpty {
            blocks.append(
                SlackBlock(
                    type: "section", text: SlackText(type: "mrkdwn", text: Self.cut(lines.map(Self.slackEscaped).joined(separator: "\n"), 3000))))
        }
        blocks.append(SlackBlock(type: "context", elements: [SlackText(type: "mrkdwn", text: Self.cut(Self.slackEscaped(audienceLine), 3000))]))
        return SlackMessage(text: Self.cut(Self.slackEscaped(summary), 3000), blocks: blocks)
    }

    /// Slack's three control characters (its docs: escaping text).
    static func slackEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    static func cut(_ text: String, _ limit: Int) -> String { text.count <= limit ? text : String(text.prefix(limit - 1)) + "…" }
}

// MARK: - Google Chat

extension PublishNotice {
    struct ChatMessage: Encodable, Sendable {
        var text: String
        var cardsV2: [CardWithID]
    }

    struct CardWithID: Encodable, Sendable {
        var cardId: String
        var card: Card
    }

    struct Card: Encodable, Sendable {
        var header: Header
        var sections: [Section]
    }

    struct Header: Encodable, Sendable {
        var title: String
        var subtitle: String
    }

    struct Section: Encodable, Sendable {
        var header: String?
        var widgets: [Widget]
    }

    struct Widget: Encodable, Sendable {
        var textParagraph: Paragraph
    }

    struct Paragraph: Encodable, Sendable {
        var text: String
    }

    /// A message whose text is the one-line summary, and a card with the change and the audiences pinged.
    var googleChat: ChatMessage {
        var sections: [Section] = []
        if let description, !description.isEmpty {
            sections.append(Section(header: nil, widgets: [Widget(textParagraph: Paragraph(text: Self.htmlEscaped(description)))]))
        }
        let lines = changeLines
        if !lines.isEmpty {
            sections.append(
                Section(
                    header: "What changed", widgets: [Widget(textParagraph: Paragraph(text: lines.map(Self.htmlEscaped).joined(separator: "<br>")))]))
        }
        sections.append(Section(header: "Apps", widgets: [Widget(textParagraph: Paragraph(text: Self.htmlEscaped(audienceLine)))]))
        let card = Card(
            header: Header(title: Self.cut(headline, 200), subtitle: "\(updateType ?? "update") from \(updateOrigin ?? "an unknown origin")"),
            sections: sections)
        return ChatMessage(text: Self.cut(summary, 4000), cardsV2: [CardWithID(cardId: "rc-relay-\(project)-\(versionNumber)", card: card)])
    }

    /// A card's text takes a few HTML tags: the text's own `<`, `>` and `&` are escaped.
    static func htmlEscaped(_ text: String) -> String { slackEscaped(text) }
}
