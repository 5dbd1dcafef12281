import Foundation

/// One Remote Config template version, as Firebase describes a publish or a rollback.
///
/// Unknown enum values and unknown fields are kept as data, never treated as errors: Firebase adds new values.
public struct TemplateVersion: Sendable, Equatable {
    /// The version number; Firebase encodes this int64 as a JSON number or as a decimal string.
    public var versionNumber: Int64
    /// When the version was created, RFC 3339 as sent.
    public var updateTime: String?
    /// Who published it.
    public var updateUser: User?
    /// The publisher's description; may be empty.
    public var description: String?
    /// `CONSOLE`, `REST_API`, `ADMIN_SDK_NODE`, … kept as sent.
    public var updateOrigin: String?
    /// `INCREMENTAL_UPDATE`, `FORCED_UPDATE`, `ROLLBACK`, … kept as sent.
    public var updateType: String?
    /// For rollbacks: the version rolled back to.
    public var rollbackSource: Int64?

    /// The account that made the change.
    public struct User: Sendable, Equatable, Codable {
        public var name: String?
        public var email: String?
        public var imageUrl: String?
        public init(name: String? = nil, email: String? = nil, imageUrl: String? = nil) {
            self.name = name
            self.email = email
            self.imageUrl = imageUrl
        }
    }

    public init(
        versionNumber: Int64, updateTime: String? = nil, updateUser: User? = nil, description: String? = nil,
        updateOrigin: String? = nil, updateType: String? = nil, rollbackSource: Int64? = nil
    ) {
        self.versionNumber = versionNumber
        self.updateTime = updateTime
        self.updateUser = updateUser
        self.description = description
        self.updateOrigin = updateOrigin
        self.updateType = updateType
        self.rollbackSource = rollbackSource
    }
}

extension TemplateVersion: Codable {
    private enum CodingKeys: String, CodingKey {
        case versionNumber, updateTime, updateUser, description, updateOrigin, updateType, rollbackSource
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        guard c.contains(.versionNumber) else {
            throw DecodingError.keyNotFound(
                CodingKeys.versionNumber, .init(codingPath: [], debugDescription: "versionNumber is required"))
        }
        self.versionNumber = try c.decodeInt64(forKey: .versionNumber)
        self.updateTime = try c.decodeIfPresent(String.self, forKey: .updateTime)
        self.updateUser = try c.decodeIfPresent(User.self, forKey: .updateUser)
        self.description = try c.decodeIfPresent(String.self, forKey: .description)
        self.updateOrigin = try c.decodeIfPresent(String.self, forKey: .updateOrigin)
        self.updateType = try c.decodeIfPresent(String.self, forKey: .updateType)
        let hasRollbackSource = try c.contains(.rollbackSource) && !c.decodeNil(forKey: .rollbackSource)
        self.rollbackSource = hasRollbackSource ? try c.decodeInt64(forKey: .rollbackSource) : nil
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        // Encoded the way the REST API does: int64 as a decimal string.
        try c.encode(String(versionNumber), forKey: .versionNumber)
        try c.encodeIfPresent(updateTime, forKey: .updateTime)
        try c.encodeIfPresent(updateUser, forKey: .updateUser)
        try c.encodeIfPresent(description, forKey: .description)
        try c.encodeIfPresent(updateOrigin, forKey: .updateOrigin)
        try c.encodeIfPresent(updateType, forKey: .updateType)
        try c.encodeIfPresent(rollbackSource.map(String.init), forKey: .rollbackSource)
    }
}

extension KeyedDecodingContainer {
    /// Reads an int64 sent as a JSON number or as a decimal string, as Google's JSON mapping allows.
    /// The string is tried first: it is what Google's REST API and Eventarc send, and a failed attempt costs a thrown
    /// `DecodingError`.
    fileprivate func decodeInt64(forKey key: Key) throws -> Int64 {
        if let text = try? decode(String.self, forKey: key) {
            // As openapi.yaml says: an optional minus, then 1 to 19 digits (no plus, no spaces), within int64 as a JSON
            // number is.
            let digits = text.utf8.first == UInt8(ascii: "-") ? text.utf8.dropFirst() : text.utf8[...]
            if (1...19).contains(digits.count), digits.allSatisfy({ (48...57).contains($0) }), let number = Int64(text) { return number }
        } else if let number = try? decode(Int64.self, forKey: key) {
            return number
        }
        throw DecodingError.dataCorruptedError(
            forKey: key, in: self, debugDescription: "\(key.stringValue) must be an integer or a decimal string")
    }
}
