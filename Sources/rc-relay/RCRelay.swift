import ArgumentParser

/// `rc-relay`: Remote Config template updates in, FCM topic pings out.
@main
struct RCRelay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rc-relay",
        abstract: "Relays Firebase Remote Config template updates to FCM topic pings.",
        subcommands: [Serve.self, CheckConfig.self, DoctorCommand.self, Emulator.self, Simulate.self],
        defaultSubcommand: Serve.self)
}
