import ArgumentParser
import Foundation
import Logging
import RelayServer

/// `rc-relay doctor --config FILE`: is this set-up right, against the real Google endpoints it names?
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check a configuration against Google (credentials, clock, FCM validate_only, Remote Config), the store and OIDC keys.",
        discussion: "Sends no ping: FCM is asked with validate_only. Exits 0 when nothing failed, 1 when a check failed.")

    @Option(name: .shortAndLong, help: "The YAML configuration file serve reads (or RC_RELAY_CONFIG).")
    var config: String?

    @Flag(help: "Print the report as JSON, for scripts.")
    var json = false

    @Argument(parsing: .allUnrecognized, help: "Settings over the file, as serve takes them.")
    var settings: [String] = []

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let path = config ?? environment[EnvironmentOverrides.configPath] else {
            throw ValidationError("doctor checks a configuration: give it with --config FILE (or RC_RELAY_CONFIG)")
        }
        // Quiet: the report is the output.
        let logger = Logger(label: "rc-relay-doctor") { _ in SwiftLogNoOpLogHandler() }
        let report: DoctorReport
        do {
            let loaded = try ConfigurationLoader(environment: environment, arguments: settings).load(path: path)
            report = await Doctor.run(settings: loaded, configuration: path, logger: logger)
        } catch {
            report = Doctor.unreadable(path, error: error)
        }
        if json {
            print(report.json())
        } else {
            let terminal = isatty(STDOUT_FILENO) == 1
            let color = terminal && environment["NO_COLOR"] == nil
            print(report.table(width: Self.width(environment, terminal: terminal), color: color), terminator: "")
        }
        if !report.ok { throw ExitCode(1) }
    }

    /// `COLUMNS` when set, else the terminal's width, else 120 (a pipe, a file).
    static func width(_ environment: [String: String], terminal: Bool) -> Int {
        if let columns = environment["COLUMNS"].flatMap(Int.init), columns > 0 { return columns }
        var size = winsize()
        if terminal, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 120
    }
}
