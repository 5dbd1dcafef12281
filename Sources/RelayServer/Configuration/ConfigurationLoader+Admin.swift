import Foundation
import RelayCore

/// The `admin` section and the proxy-facing `server` keys.
extension ConfigurationLoader {
    func resolveAdminTokens(_ sources: [SecretSource]) throws(ConfigurationError) -> [String] {
        var tokens: [String] = []
        for (index, source) in sources.enumerated() {
            let key = "admin.tokens[\(index)]"
            let token = try read(source, key: key)
            guard token.utf8.count >= 16, token.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw ConfigurationError(
                    key: key, problem: "the token is shorter than 16 characters or has spaces", fix: "generate one: head -c32 /dev/urandom | base64")
            }
            tokens.append(token)
        }
        return tokens
    }

    func resolveAdminPort(_ port: Int?, main: Int) throws(ConfigurationError) -> Int? {
        guard let port else { return nil }
        guard (0...65_535).contains(port), port == 0 || port != main else {
            throw ConfigurationError(
                key: "admin.port", problem: "\(port) is not a TCP port of its own",
                fix: "use a port other than server.port, such as 9090 (0 picks a free one)")
        }
        return port
    }

    func resolveTrustedProxies(_ entries: [String]?) throws(ConfigurationError) -> TrustedProxies {
        var ranges: [TrustedProxies.Range] = []
        for (index, entry) in (entries ?? []).enumerated() {
            guard let range = TrustedProxies.Range(entry) else {
                throw ConfigurationError(
                    key: "server.trustedProxies[\(index)]", problem: "'\(entry)' is not an IP address or CIDR range",
                    fix: "use an address such as 10.0.0.5 or a range such as 10.0.0.0/8")
            }
            ranges.append(range)
        }
        return TrustedProxies(ranges)
    }

    func count(_ value: Int?, key: String, default fallback: Int, range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        let value = value ?? fallback
        guard range.contains(value) else {
            throw ConfigurationError(key: key, problem: "\(value) is outside \(range.lowerBound) to \(range.upperBound)", fix: "use \(fallback)")
        }
        return value
    }
}
