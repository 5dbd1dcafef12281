import ArgumentParser
import Foundation
import Logging
import RelayServer

/// `rc-relay serve [--config FILE]`: with no file, the development profile.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the relay (no configuration: the development profile).")

    @Option(name: .shortAndLong, help: "The YAML configuration file (or RC_RELAY_CONFIG).")
    var config: String?

    @Argument(
        parsing: .allUnrecognized,
        help: "Settings over the file and the environment, named as the variables are, in lower case: --log-level debug, --port 8080.")
    var settings: [String] = []

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let path = config ?? environment[EnvironmentOverrides.configPath] else {
            guard settings.isEmpty else {
                FileHandle.standardError.write(Data("Error: settings given as flags need a configuration file (--config FILE)\n".utf8))
                throw ExitCode(64)  // EX_USAGE
            }
            let logger = LogSetup.bootstrap(level: .info, format: .text)
            try await DevelopmentProfile.run(environment: environment, logger: logger)
            return
        }
        let loader = ConfigurationLoader(environment: environment, arguments: self.settings)
        let settings: RelaySettings
        do {
            settings = try loader.load(path: path)
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
        let logger = LogSetup.bootstrap(level: settings.logLevel, format: settings.logFormat)
        do {
            let tracing = try RelayTracing.bootstrap(settings.tracing, logger: logger)
            let app = try await RelayApplication.build(
                settings: settings, logger: logger, source: path, reader: { try loader.load(path: path) },
                onServerRunning: { port in
                    logger.notice(
                        "rc-relay listening",
                        metadata: [
                            "address": "\(settings.host):\(port)", "webhook_path": "\(RelaySettings.webhookPath)",
                            "projects": "\(settings.projects.map { $0.id ?? "(from the metadata server)" }.joined(separator: ","))",
                        ])
                },
                onAdminRunning: { port in
                    logger.notice("rc-relay admin listening", metadata: ["address": "\(settings.adminHost):\(port)"])
                })
            try await app.runService(after: tracing.map { [$0] } ?? [])
        } catch let error as ConfigurationError {
            // Found while building (a key file, the project id): the same exit as a mistake in the file, so a service
            // manager does not restart into it (deploy/systemd).
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
    }
}

/// `rc-relay check-config FILE`: validate without starting anything.
struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-config", abstract: "Validate a configuration file and exit.")

    @Argument(help: "The YAML configuration file.")
    var path: String

    @Argument(parsing: .allUnrecognized, help: "Settings over the file, as serve takes them.")
    var settings: [String] = []

    func run() async throws {
        do {
            let settings = try ConfigurationLoader(arguments: self.settings).load(path: path)
            for project in settings.projects {
                let routes = project.routes.routes.map(\.name).joined(separator: ", ")
                print(
                    "\(path): OK — project \(project.id ?? "(from the metadata server at start)"): \(project.routes.routes.count) route(s): \(routes)"
                )
            }
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
    }
}

enum LogSetup {
    /// Sets up the process's log handler once, in the chosen format.
    static func bootstrap(level: Logger.Level, format: RelaySettings.LogFormat) -> Logger {
        LoggingSystem.bootstrap { label in LineLogHandler(label: label, level: level, format: format) }
        var logger = Logger(label: "rc-relay")
        logger.logLevel = level
        return logger
    }
}
