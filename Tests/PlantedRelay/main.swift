import DeliveryEngine
import Foundation
import Logging
import RelayServer

// `rc-relay-planted serve --config FILE`: `rc-relay serve` with the bugs `RC_RELAY_PLANT` names (comma-separated:
// lapse-check, epoch-check, poll-epoch, progress, shared-mark) planted, for the fault campaign's proof that its
// checker catches each (docs/replicas.md, "Planted bugs"). A test-only target: `rc-relay` has no way to plant any.

/// Each bug by its name in `RC_RELAY_PLANT`.
let names: [String: PlantedBugs] = [
    "lapse-check": .lapseCheck, "epoch-check": .epochCheck, "poll-epoch": .pollEpoch, "progress": .progress, "shared-mark": .sharedMark,
]
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 3, arguments[0] == "serve", arguments[1] == "--config" else {
    FileHandle.standardError.write(Data("usage: RC_RELAY_PLANT=bug[,bug] rc-relay-planted serve --config FILE\n".utf8))
    exit(64)
}
let environment = ProcessInfo.processInfo.environment
var planted: PlantedBugs = []
for name in (environment["RC_RELAY_PLANT"] ?? "").split(separator: ",") {
    guard let bug = names[String(name)] else {
        FileHandle.standardError.write(Data("unknown bug \(name): one of \(names.keys.sorted().joined(separator: ", "))\n".utf8))
        exit(64)
    }
    planted.insert(bug)
}
let path = arguments[2]
let loader = ConfigurationLoader(environment: environment)
let settings: RelaySettings
do {
    settings = try loader.load(path: path)
} catch {
    FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
    exit(78)
}
LoggingSystem.bootstrap { label in LineLogHandler(label: label, level: settings.logLevel, format: settings.logFormat) }
let logger = {
    var logger = Logger(label: "rc-relay")
    logger.logLevel = settings.logLevel
    return logger
}()
logger.warning("bugs planted on purpose: never run this binary in production", metadata: ["planted": "\(environment["RC_RELAY_PLANT"] ?? "")"])
let app = try await RelayApplication.build(
    settings: settings, logger: logger, source: path, reader: { try loader.load(path: path) },
    onServerRunning: { port in
        logger.notice("rc-relay listening", metadata: ["address": "\(settings.host):\(port)", "webhook_path": "\(RelaySettings.webhookPath)"])
    },
    onAdminRunning: { _ in }, sleep: { try? await Task.sleep(for: $0) }, clock: SystemDeliveryClock(), planted: planted)
try await app.runService()
