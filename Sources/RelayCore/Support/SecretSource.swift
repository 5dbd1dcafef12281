/// A secret given by value, by the name of an environment variable, or by a file path (as mounted secrets are): a
/// webhook secret, an admin token, the database's password, an HTTP target's URL or signing secret. The configuration
/// loader reads it; only a value reaches validation.
public enum SecretSource: Sendable, Codable, Equatable {
    case value(String)
    case environment(String)
    case file(String)

    private enum CodingKeys: String, CodingKey { case value, env, file }

    public init(from decoder: any Decoder) throws {
        if let text = try? decoder.singleValueContainer().decode(String.self) {
            self = .value(text)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let name = try c.decodeIfPresent(String.self, forKey: .env) {
            self = .environment(name)
        } else if let path = try c.decodeIfPresent(String.self, forKey: .file) {
            self = .file(path)
        } else {
            self = .value(try c.decode(String.self, forKey: .value))
        }
    }

    /// Written as it was given, so a definition written back names the variable or the file, not its secret.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .value: try c.encode("<redacted>", forKey: .value)
        case .environment(let name): try c.encode(name, forKey: .env)
        case .file(let path): try c.encode(path, forKey: .file)
        }
    }

    /// The value, when given as one.
    public var value: String? {
        if case .value(let text) = self { return text }
        return nil
    }
}
