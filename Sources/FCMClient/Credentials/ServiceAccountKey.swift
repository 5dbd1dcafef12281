import Foundation
import JWTKit

/// A Google service-account key file (`type: service_account`), as the Firebase console downloads it.
public struct ServiceAccountKey: Sendable, Decodable {
    public var type: String
    public var projectID: String?
    public var privateKeyID: String
    public var privateKey: String
    public var clientEmail: String
    public var tokenURI: String

    private enum CodingKeys: String, CodingKey {
        case type
        case projectID = "project_id"
        case privateKeyID = "private_key_id"
        case privateKey = "private_key"
        case clientEmail = "client_email"
        case tokenURI = "token_uri"
    }

    /// Reads and checks a key file; errors name the missing field, never the key itself.
    public init(contentsOf path: String) throws(CredentialsError) {
        guard let data = BoundedFile.read(path) else {
            throw .unreadable(path: path, reason: "cannot be read, or is not a regular file of at most \(BoundedFile.defaultLimit) bytes")
        }
        try self.init(json: data, path: path)
    }

    /// Parses key-file JSON.
    public init(json: Data, path: String = "(inline)") throws(CredentialsError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: json)
        } catch DecodingError.keyNotFound(let key, _) {
            throw .unreadable(path: path, reason: "has no '\(key.stringValue)' field")
        } catch {
            throw .unreadable(path: path, reason: "is not a service-account key file (JSON)")
        }
        guard type == "service_account" else {
            throw .unreadable(path: path, reason: "has type '\(type)', expected 'service_account'")
        }
        // The key is read here as signing reads it, so check-config and doctor refuse a key that serve would.
        guard (try? Insecure.RSA.PrivateKey(pem: privateKey)) != nil else { throw .invalidPrivateKey(path: path) }
    }
}

/// Why credentials could not be loaded.
public enum CredentialsError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalidPrivateKey(path: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "the key file \(path) \(reason)"
        case .invalidPrivateKey(let path): "the key file \(path) has a private_key that is not an RSA PEM key"
        }
    }
}
