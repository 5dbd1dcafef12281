import CryptoExtras
import Foundation
import JWTKit

/// Makes service-account key files the emulator trusts, shaped like the ones the Firebase console downloads.
public enum ServiceAccountFactory {
    /// Generates an RSA-2048 key, registers its public half with `state`, and returns the key file's JSON.
    public static func make(
        project: String, tokenURI: String, state: EmulatorState,
        email: String? = nil
    ) async throws -> Data {
        let privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keyID = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let email = email ?? "firebase-adminsdk-emu@\(project).iam.gserviceaccount.com"
        try await state.register(
            keyID: keyID, email: email, project: project, tokenURI: tokenURI,
            publicKeyPEM: privateKey.publicKey.pemRepresentation)
        let file: [String: String] = [
            "type": "service_account",
            "project_id": project,
            "private_key_id": keyID,
            "private_key": privateKey.pkcs8PEMRepresentation,
            "client_email": email,
            "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": tokenURI,
        ]
        return try JSONSerialization.data(withJSONObject: file, options: [.prettyPrinted, .sortedKeys])
    }

    /// Registers an existing key file's public key with `state`, so a restarted emulator trusts it again.
    public static func trust(keyFile: Data, tokenURI: String, state: EmulatorState) async throws {
        guard let object = try JSONSerialization.jsonObject(with: keyFile) as? [String: Any],
            let pem = object["private_key"] as? String, let keyID = object["private_key_id"] as? String,
            let email = object["client_email"] as? String, let project = object["project_id"] as? String
        else { throw EmulatorSetupError.invalidKeyFile }
        let privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        try await state.register(
            keyID: keyID, email: email, project: project, tokenURI: (object["token_uri"] as? String) ?? tokenURI,
            publicKeyPEM: privateKey.publicKey.pemRepresentation)
    }
}

/// Why the emulator could not be set up.
public enum EmulatorSetupError: Error, CustomStringConvertible {
    case invalidKeyFile
    public var description: String { "the key file is not a service-account key file with an RSA private key" }
}
