import DeliveryEngine
import FCMEmulator
import Foundation
import RelayCore
import Testing
import Yams

@testable import RelayServer

private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

private func text(_ path: String) throws -> String {
    try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
}

// MARK: Tests

@Test func openAPIDocumentsEveryAnswerOfTheWebhook() throws {
    let spec = try #require(try Yams.load(yaml: try text("openapi.yaml")) as? [String: Any])
    let paths = try #require(spec["paths"] as? [String: Any])
    let webhook = try #require((paths[RelaySettings.webhookPath] as? [String: Any])?["post"] as? [String: Any])
    #expect((paths["/healthz"] as? [String: Any])?["get"] != nil)
    let responses = try #require(webhook["responses"] as? [String: Any])
    let documented = Set(responses.keys)
    for kind in ProblemKind.ingest {
        #expect(documented.contains(String(kind.status.code)), "status \(kind.status.code) of \(kind.rawValue)")
    }
    #expect(documented == Set(ProblemKind.ingest.map { String($0.status.code) } + ["200", "202", "500"]))
    let pubSub = try #require((paths[RelaySettings.pubsubPath] as? [String: Any])?["post"] as? [String: Any])
    #expect(Set((pubSub["responses"] as? [String: Any] ?? [:]).keys) == documented.union(["404"]))
    let schemas = try #require((spec["components"] as? [String: Any])?["schemas"] as? [String: Any])
    let problemTypes = ((((schemas["Problem"] as? [String: Any])?["properties"] as? [String: Any])?["type"] as? [String: Any])?["enum"] as? [String])
    #expect(Set(problemTypes ?? []) == Set(ProblemKind.allCases.map(\.uri)))
    let headers = (webhook["parameters"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
    for header in ["webhook-id", "webhook-timestamp", "webhook-signature", "ce-id", "ce-type", "ce-source", "ce-specversion"] {
        #expect(headers.contains(header), "\(header)")
    }
}

@Test func docsDocumentEverySettingVariablePlaceholderAndProblem() throws {
    let configuration = try text("docs/configuration.md")
    let webhook = try text("docs/webhook.md")
    for override in EnvironmentOverrides.all {
        #expect(configuration.contains("| `\(override.key)` | `\(override.variable)` |"), "\(override.variable)")
    }
    for (section, keys) in ConfigurationFile.knownKeys where !section.isEmpty && !section.hasPrefix("routes") && !section.contains("[]") {
        for key in keys { #expect(configuration.contains("`\(section).\(key)`"), "\(section).\(key)") }
    }
    // A secret's `value`, `env` and `file` are documented once, for every secret.
    let secretForms: Set<String> = ["value", "env", "file"]
    for (section, keys) in ConfigurationFile.knownKeys where section.hasPrefix("routes[]") && keys != secretForms {
        let prefix = section == "routes[]" ? "" : String(section.dropFirst("routes[].".count)) + "."
        // A key that is itself a section (android, when, …) is documented through its own keys; a secret has a row.
        for key in keys where (ConfigurationFile.knownKeys["\(section).\(key)"] ?? secretForms) == secretForms {
            #expect(configuration.contains("| `\(prefix)\(key)` |"), "route key \(prefix)\(key)")
        }
    }
    for key in ConfigurationFile.knownKeys["projects[]"] ?? [] {
        #expect(configuration.contains("| `projects[].\(key)` |"), "projects[].\(key)")
    }
    for field in DataTemplate.Field.allCases {
        // The placeholder's own row names its budget, as its last cell.
        let row = configuration.split(separator: "\n").first { $0.hasPrefix("| `{{\(field.rawValue)}}` |") }
        #expect(row != nil, "{{\(field.rawValue)}}")
        #expect(row?.hasSuffix("| \(field.budget) |") == true || row?.hasSuffix("| \(field.budget) bytes |") == true, "budget of \(field.rawValue)")
    }
    for kind in ProblemKind.allCases {
        #expect(webhook.contains("| \(kind.status.code) | `\(kind.uri)` |"), "\(kind.uri)")
    }
}

@Test func readmeIsShortAndEveryRelativeLinkPointsToAFile() throws {
    let readme = try text("README.md")
    #expect(readme.components(separatedBy: "\n").count < 300, "README.md has 300 lines or more")
    let pages = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
        .filter { $0.hasSuffix(".md") }.sorted()
    #expect(!pages.isEmpty)
    for page in pages {
        #expect(readme.contains("](docs/\(page))"), "README.md links docs/\(page)")
    }
    for document in ["README.md"] + pages.map({ "docs/\($0)" }) {
        let folder = root.appendingPathComponent(document).deletingLastPathComponent()
        // Every `](target)`: a target with a scheme or only an anchor is not a file of the repository.
        for piece in try text(document).components(separatedBy: "](").dropFirst() {
            guard let end = piece.firstIndex(of: ")") else { continue }
            let target = String(piece[..<end])
            if target.contains("://") || target.hasPrefix("mailto:") || target.hasPrefix("#") { continue }
            let path = String(target.prefix(while: { $0 != "#" }))
            let file = folder.appendingPathComponent(path).standardizedFileURL.path
            #expect(FileManager.default.fileExists(atPath: file), "\(document) links \(target), which does not exist")
        }
    }
}

@Test func exampleConfigurationIsValid() async throws {
    let key = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-example-\(UUID().uuidString).json")
    try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "http://127.0.0.1:1/token", state: EmulatorState()).write(to: key)
    let settings = try ConfigurationLoader(environment: [
        "RC_RELAY_WEBHOOK_SECRET": WebhookSecret.generate(), "RC_RELAY_FCM_CREDENTIALS_FILE": key.path,
    ]).load(yaml: try text("deploy/rc-relay.example.yaml"))
    #expect(settings.projects[0].routes.routes.map(\.name) == ["default", "rollbacks-to-testers"])
}

@Test func everyProblemStatusIsDocumentedForSomeOperation() throws {
    let spec = try #require(try Yams.load(yaml: try text("openapi.yaml")) as? [String: Any])
    let paths = try #require(spec["paths"] as? [String: [String: Any]])
    var statuses: Set<String> = []
    for item in paths.values {
        for operation in item.values {
            statuses.formUnion(((operation as? [String: Any])?["responses"] as? [String: Any] ?? [:]).keys)
        }
    }
    // 405 answers a method no operation declares, so no operation can list it; the Problem schema names its type.
    for kind in ProblemKind.allCases where kind != .methodNotAllowed {
        #expect(statuses.contains(String(kind.status.code)), "\(kind.rawValue)")
    }
}

@Test func everyPathAndMethodOfTheSpecIsInTheAllowTable() throws {
    let spec = try #require(try Yams.load(yaml: try text("openapi.yaml")) as? [String: Any])
    let paths = try #require(spec["paths"] as? [String: [String: Any]])
    let verbs: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
    var declared: [String: Set<String>] = [:]
    for (path, item) in paths { declared[path] = Set(item.keys.filter(verbs.contains).map { $0.uppercased() }) }
    #expect(declared == AllowedMethods.table.mapValues { Set($0.map(\.rawValue)) })
}

/// The app-side shard example says which shard an installation ID falls in; the hash the docs give (32-bit FNV-1a of
/// the UTF-8 bytes, modulo the shards) must put it there.
@Test func theAppSideShardExampleMatchesItsHash() throws {
    let appSide = try text("docs/app-side.md")
    let example = try #require(appSide.firstMatch(of: /installation ID `([^`]+)` is in shard (\d+) of (\d+)/))
    var hash: UInt32 = 0x811C_9DC5
    for byte in String(example.1).utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
    #expect(Int(hash % UInt32(example.3)!) == Int(example.2)!)
    #expect(
        appSide.contains("for byte in installationID.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }"),
        "the Swift example is the hash checked here")
}

@Test func operationsDocumentsEveryMetricTheCodeMakes() throws {
    let operations = try text("docs/operations.md")
    var names: Set<String> = []
    for folder in ["Sources/RelayServer", "Sources/DeliveryEngine"] {
        let files = FileManager.default.enumerator(at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let source = try String(contentsOf: file, encoding: .utf8)
            for match in source.matches(of: /"(rc_relay_[a-z_]+)"/) { names.insert(String(match.1)) }
        }
    }
    #expect(names.count > 20)
    for name in names.sorted() { #expect(operations.contains("| `\(name)` |"), "\(name)") }
}

/// operations.md's row for `POST /admin/reload` names exactly the settings a reload reports under `restartRequired`.
@Test func operationsNamesEverySettingOnlyARestartApplies() throws {
    let operations = try text("docs/operations.md")
    let row = try #require(operations.split(separator: "\n").first { $0.hasPrefix("| `POST /admin/reload` |") })
    let named = Set(row.matches(of: /`([a-z]+\.[A-Za-z]+)`/).map { String($0.1) })
    #expect(named == Set(RelaySettings.restartOnly.map(\.key)))
}

/// Issue #48: the figures operations.md and console.md give for the log's bounds, the trace context's limits and the
/// token throttle are the code's.
@Test func theHostileInputFiguresInTheDocsAreTheCodes() throws {
    // Compared with line breaks and indentation as single spaces.
    func flat(_ text: String) -> String { text.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
    let operations = flat(try text("docs/operations.md"))
    let console = flat(try text("docs/console.md"))
    func figure(_ value: Int) -> String { value.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US"))) }
    #expect(operations.contains("cut after **\(figure(LogText.maximumValueBytes)) bytes** of its escaped text"))
    #expect(operations.contains("a key after \(LogText.maximumKeyBytes) bytes"))
    #expect(operations.contains("at most \(TraceHeaders.maximumStateMembers) members within \(TraceHeaders.maximumStateBytes) bytes"))
    #expect(GuessThrottle.maximumDelay == .seconds(8) && GuessThrottle.firstDelay == .milliseconds(250) && GuessThrottle.window == .seconds(15 * 60))
    #expect(operations.contains("0.25 s after its first failure, doubling with each one, at most 8 s"))
    #expect(operations.contains("at most \(figure(GuessThrottle.capacity)) clients are remembered"))
    #expect(console.contains("at most \(figure(GuessThrottle.capacity)) clients are remembered"))
}
