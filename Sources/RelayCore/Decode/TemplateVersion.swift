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

        private enum CodingKeys: String, CodingKey { case name, email, imageUrl }
        private static let fieldNames: [String: CodingKeys] = ["name": .name, "email": .email, "imageUrl": .imageUrl, "image_url": .imageUrl]

        public init(from decoder: any Decoder) throws {
            let c = try ProtoJSON.Fields(decoder, names: Self.fieldNames)
            self.init(name: try c.string(.name), email: try c.string(.email), imageUrl: try c.string(.imageUrl))
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

    /// Protobuf's JSON mapping, as Eventarc and Google's libraries write it: each field under its JSON name or its
    /// original proto name (`versionNumber` or `version_number`), enums by name or by number, int64 as a number or a
    /// decimal string, unknown fields ignored, `updateTime` with any offset (kept in UTC).
    public init(from decoder: any Decoder) throws {
        let c = try ProtoJSON.Fields(decoder, names: Self.fieldNames)
        guard let versionKey = c.key(.versionNumber) else {
            throw DecodingError.keyNotFound(
                ProtoJSON.Key(CodingKeys.versionNumber.rawValue), .init(codingPath: [], debugDescription: "versionNumber is required"))
        }
        self.versionNumber = try c.container.decodeInt64(forKey: versionKey)
        self.updateTime = try c.string(.updateTime).map { ProtoJSON.utcTimestamp($0) ?? $0 }
        self.updateUser = try c.key(.updateUser).flatMap { try c.container.decodeIfPresent(User.self, forKey: $0) }
        self.description = try c.string(.description)
        self.updateOrigin = try c.enumeration(.updateOrigin, names: Self.updateOrigins)
        self.updateType = try c.enumeration(.updateType, names: Self.updateTypes)
        // 0 is proto3's default: google-events writes `"rollbackSource": "0"` for a publish that is no rollback.
        if let key = c.key(.rollbackSource), try !c.container.decodeNil(forKey: key), case let source = try c.container.decodeInt64(forKey: key),
            source != 0
        {
            self.rollbackSource = source
        } else {
            self.rollbackSource = nil
        }
    }

    /// Each field's JSON name and original proto name.
    private static let fieldNames: [String: CodingKeys] = [
        "versionNumber": .versionNumber, "version_number": .versionNumber, "updateTime": .updateTime, "update_time": .updateTime,
        "updateUser": .updateUser, "update_user": .updateUser, "description": .description, "updateOrigin": .updateOrigin,
        "update_origin": .updateOrigin, "updateType": .updateType, "update_type": .updateType, "rollbackSource": .rollbackSource,
        "rollback_source": .rollbackSource,
    ]

    /// `google.events.firebase.remoteconfig.v1.RemoteConfigUpdateOrigin` and `…UpdateType`, by number.
    static let updateOrigins = ["REMOTE_CONFIG_UPDATE_ORIGIN_UNSPECIFIED", "CONSOLE", "REST_API", "ADMIN_SDK_NODE"]
    static let updateTypes = ["REMOTE_CONFIG_UPDATE_TYPE_UNSPECIFIED", "INCREMENTAL_UPDATE", "FORCED_UPDATE", "ROLLBACK"]

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
    func decodeInt64(forKey key: Key) throws -> Int64 {
        if let text = try? decode(String.self, forKey: key) {
            if let number = ProtoJSON.int64(decimal: text) { return number }
        } else if let number = try? decode(Int64.self, forKey: key) {
            return number
        }
        throw DecodingError.dataCorruptedError(
            forKey: key, in: self, debugDescription: "\(key.stringValue) must be an integer or a decimal string")
    }
}
