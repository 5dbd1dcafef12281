import ArgumentParser
@main struct RCRelay: AsyncParsableCommand {}
