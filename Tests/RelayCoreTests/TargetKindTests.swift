import Foundation
import RelayCore
import Testing

/// A third kind of target, written here as its own files would be (docs/development.md, "A third kind of target"): a
/// queue that takes a line per version. Nothing in RelayCore names it; the decoder is given it, as RelayServer's
/// `TargetKinds.all` gives the HTTP target's kind.
private struct QueueKind: TargetKind {
    var key: String { "queue" }
    var knownKeys: [String: Set<String>] { ["": ["name", "token"], "token": ["value", "env", "file"]] }
    func definition(from decoder: any Decoder) throws -> any TargetDefinition { try QueueDefinition(from: decoder) }
}

private struct QueueDefinition: TargetDefinition, Equatable, Codable {
    var name: String?
    var token: SecretSource?
    var key: String { "queue" }

    func readingSecrets(_ read: (SecretSource, String) -> String?) -> any TargetDefinition {
        var definition = self
        definition.token = token.map { .value(read($0, "queue.token") ?? "") }
        return definition
    }

    func target(route: String) throws(RouteError) -> any RouteTarget {
        guard let name, !name.isEmpty else { throw RouteError(key: "queue.name", problem: "it is missing", fix: "name the queue") }
        return QueueTarget(queue: name)
    }
}

private struct QueueTarget: RouteTarget {
    var queue: String
    var kind: String { "queue" }
    var summary: String { "queue \(queue)" }
    var shownURL: String { "queue://\(queue)" }
    var service: String { "queue" }
    func message(for version: TemplateVersion, project: String, route: String, change: TemplateChange, audiences: [String])
        -> any TargetMessage
    {
        QueueMessage(
            route: route, line: "\(project) \(version.versionNumber) \(change.changedParameters?.joined(separator: ",") ?? "*") \(audiences)")
    }
}

private struct QueueMessage: TargetMessage, Equatable {
    var route: String
    var line: String
    var kind: String { "queue" }
    var body: [UInt8] { Array(line.utf8) }
    var preview: any Encodable & Sendable { line }
}

private func routes(_ json: String, kinds: [any TargetKind] = [QueueKind(), HTTPTargetKind()]) throws -> [RouteDefinition] {
    let decoder = JSONDecoder()
    decoder.userInfo[RouteDefinition.targetKinds] = kinds
    return try decoder.decode([RouteDefinition].self, from: Data(json.utf8))
}

private let version9 = TemplateVersion(
    versionNumber: 9, updateTime: "2026-12-04T10:00:00Z", updateUser: .init(email: "release@example.com"), description: nil,
    updateOrigin: "CONSOLE", updateType: "INCREMENTAL_UPDATE")

@Test func aThirdKindOfTargetIsReadValidatedAndRoutedWithoutRelayCoreNamingIt() throws {
    let definitions = try routes(
        #"[{"name": "jobs", "queue": {"name": "rc-jobs", "token": {"env": "QUEUE_TOKEN"}}}, {"name": "default", "topic": "PUSH_RC"}]"#)
    #expect(definitions[0].targets.first?.isEqual(to: QueueDefinition(name: "rc-jobs", token: .environment("QUEUE_TOKEN"))) == true)
    // Its secrets are read by whoever loads the configuration, under the keys the kind names.
    var keys: [String] = []
    var read = definitions
    read[0].targets = read[0].targets.map {
        $0.readingSecrets { _, key in
            keys.append(key)
            return "t0ken"
        }
    }
    #expect(keys == ["queue.token"] && read[0] != definitions[0])
    let table = try RouteTable(read)
    #expect(table.routes[0].destination?.summary == "queue rc-jobs" && table.routes[0].isChangeAware)
    let pings = table.pings(for: version9, project: "demo-project", change: .notNeeded)
    // In route order, with the FCM audiences the version's pings reach, through its route's own sender.
    #expect(pings.map(\.route) == ["jobs", "default"])
    #expect(pings[0].payload == .target(QueueMessage(route: "jobs", line: #"demo-project 9 * ["topic:PUSH_RC"]"#)))
    #expect(pings[0].payload.sender == PingPayload.sender(route: "jobs"))
    #expect(pings[0].payload.audience == PingAudience(kind: "queue", name: "jobs"))
    #expect(pings[0].payload.loggable == #"demo-project 9 * ["topic:PUSH_RC"]"#)
    // Written back under its own key.
    let written = try JSONSerialization.jsonObject(with: JSONEncoder().encode(definitions[0])) as! [String: Any]
    #expect((written["queue"] as? [String: Any])?["name"] as? String == "rc-jobs")
}

@Test func aRouteHasOneTargetOfOneKindAndAKindTheDecoderIsNotGivenIsNotRead() throws {
    func refusal(_ json: String) throws -> RouteError? {
        do throws(RouteError) {
            _ = try Route(try! routes(json)[0], index: 0)
            return nil
        } catch {
            return error
        }
    }
    let two = try refusal(#"[{"queue": {"name": "q"}, "webhook": {"url": "https://e.com/x", "format": "slack"}}]"#)
    #expect(two?.key == "webhook" && two?.problem == "the route has a queue target already")
    let fcm = try refusal(#"[{"queue": {"name": "q"}, "data": {"A": "b"}}]"#)
    #expect(fcm?.key == "data" && fcm?.problem == "the route has a queue target, and data describes an FCM message")
    #expect(try refusal(#"[{"queue": {}}]"#)?.key == "queue.name")
    #expect(try refusal(#"[{"queue": null, "topic": "T"}]"#) == nil)
    // A kind a relay does not list is not a target: the configuration's key check refuses its key first.
    #expect(try routes(#"[{"queue": {"name": "q"}, "topic": "T"}]"#, kinds: [HTTPTargetKind()])[0].targets.isEmpty)
    // A kind's definition of the wrong shape is the decoder's error, at the kind's key.
    #expect(throws: DecodingError.self) { try routes(#"[{"queue": {"name": 5}}]"#) }
}
