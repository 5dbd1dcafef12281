import Foundation

/// A Google API discovery document's schemas: what the emulator checks requests (FCM's `messages:send`) and its own
/// answers (Remote Config's) against, so that its field names, types and enums are Google's own.
struct DiscoveryDocument: Sendable {
    /// The API's name and the document's revision (`fcm`, `20261023`).
    let name: String
    let revision: String
    /// The proto package its types live in, for error messages (`google.firebase.fcm.v1`).
    let package: String
    let schemas: [String: Kind]

    /// What a field may hold.
    indirect enum Kind: Sendable {
        /// A message: its fields under their JSON name and their proto name (`collapseKey`, `collapse_key`).
        case message(id: String, fields: [String: Kind])
        /// A map from strings to values of one kind (`data`, `headers`).
        case map(Kind)
        case array(Kind)
        case string(format: String?)
        case enumeration([String])
        case integer(format: String?)
        case number(format: String?)
        case boolean
        /// Any JSON value (`google.protobuf.Value`, an APNs payload).
        case any
        case reference(String)
    }

    struct Unreadable: Error, CustomStringConvertible {
        var description: String
    }

    init(json: String, package: String) throws(Unreadable) {
        guard let root = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
            let schemas = root["schemas"] as? [String: [String: Any]]
        else { throw Unreadable(description: "not a discovery document") }
        self.name = root["name"] as? String ?? ""
        self.revision = root["revision"] as? String ?? ""
        self.package = package
        var kinds: [String: Kind] = [:]
        for (id, schema) in schemas { kinds[id] = Self.kind(schema, id: id) }
        self.schemas = kinds
    }

    private static func kind(_ schema: [String: Any], id: String? = nil) -> Kind {
        if let reference = schema["$ref"] as? String { return .reference(reference) }
        switch schema["type"] as? String {
        case "object":
            if let properties = schema["properties"] as? [String: [String: Any]] {
                var fields: [String: Kind] = [:]
                for (name, property) in properties {
                    let kind = kind(property)
                    fields[name] = kind
                    fields[protoName(name)] = kind
                }
                return .message(id: id ?? "", fields: fields)
            }
            if let additional = schema["additionalProperties"] as? [String: Any] { return .map(kind(additional)) }
            return .message(id: id ?? "", fields: [:])
        case "array": return .array((schema["items"] as? [String: Any]).map { kind($0) } ?? .any)
        case "string":
            if let values = schema["enum"] as? [String] { return .enumeration(values) }
            return .string(format: schema["format"] as? String)
        case "integer": return .integer(format: schema["format"] as? String)
        case "number": return .number(format: schema["format"] as? String)
        case "boolean": return .boolean
        default: return .any
        }
    }

    /// A JSON name's proto name: `collapseKey` → `collapse_key`, `androidV2` → `android_v2`.
    static func protoName(_ jsonName: String) -> String {
        jsonName.reduce(into: "") { out, character in
            if character.isUppercase { out += "_" + character.lowercased() } else { out.append(character) }
        }
    }
}

extension DiscoveryDocument {
    /// FCM HTTP v1's document (`fcm.v1.json`, embedded from `Tests/Fixtures/google`).
    static let fcm: DiscoveryDocument = {
        do {
            return try DiscoveryDocument(json: GoogleDocuments.fcmV1, package: "google.firebase.fcm.v1")
        } catch {
            fatalError("the embedded fcm.v1.json is unreadable: \(error)")
        }
    }()

    /// Remote Config v1's document (`firebaseremoteconfig.v1.json`, the last revision Google published).
    static let remoteConfig: DiscoveryDocument = {
        do {
            return try DiscoveryDocument(json: GoogleDocuments.remoteConfigV1, package: "google.firebase.remoteconfig.v1")
        } catch {
            fatalError("the embedded firebaseremoteconfig.v1.json is unreadable: \(error)")
        }
    }()
}
