import Foundation
import RelayCore
import Testing

private let vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
private let vectorID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
private let vectorTimestamp: Int64 = 1_614_265_330
private let vectorBody = Data(#"{"test": 2432232314}"#.utf8)
private let vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

private func verifier(_ secrets: String...) throws -> StandardWebhookVerifier {
    StandardWebhookVerifier(secrets: try secrets.map { try WebhookSecret($0) })
}

private func headers(signature: String = vectorSignature, timestamp: Int64 = vectorTimestamp) -> StandardWebhookVerifier.Headers {
    .init(id: vectorID, timestamp: String(timestamp), signature: signature)
}

private let vectorTime = Date(timeIntervalSince1970: Double(vectorTimestamp))

// MARK: Tests

@Test func acceptsTheSharedTestVector() throws {
    try verifier(vectorSecret).verify(headers(), body: vectorBody, now: vectorTime)
}

@Test func signsTheSharedTestVector() throws {
    let signature = StandardWebhookVerifier.sign(
        id: vectorID, timestamp: vectorTimestamp, body: vectorBody, secret: try WebhookSecret(vectorSecret))
    #expect(signature == vectorSignature)
}

@Test func acceptsAnyOfSeveralSecretsDuringRotation() throws {
    let other = WebhookSecret.generate()
    try verifier(other, vectorSecret).verify(headers(), body: vectorBody, now: vectorTime)
}

@Test func acceptsAnyMatchingEntryAndIgnoresOtherVersions() throws {
    let header = "v1a,c29tZXRoaW5n v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= \(vectorSignature)"
    try verifier(vectorSecret).verify(headers(signature: header), body: vectorBody, now: vectorTime)
}

@Test func rejectsATamperedBody() throws {
    #expect(throws: VerificationError.signatureMismatch) {
        try verifier(vectorSecret).verify(headers(), body: Data(#"{"test": 2432232315}"#.utf8), now: vectorTime)
    }
}

@Test func rejectsTheBodyReencoded() throws {
    // The raw bytes are signed: the same JSON without the space is a different body.
    #expect(throws: VerificationError.signatureMismatch) {
        try verifier(vectorSecret).verify(headers(), body: Data(#"{"test":2432232314}"#.utf8), now: vectorTime)
    }
}

@Test func rejectsAnotherSecret() throws {
    #expect(throws: VerificationError.signatureMismatch) {
        try verifier(WebhookSecret.generate()).verify(headers(), body: vectorBody, now: vectorTime)
    }
}

@Test func rejectsOnlyUnknownSignatureVersions() throws {
    #expect(throws: VerificationError.signatureMismatch) {
        try verifier(vectorSecret).verify(headers(signature: "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), body: vectorBody, now: vectorTime)
    }
}

@Test func enforcesFiveMinutesEitherWay() throws {
    let v = try verifier(vectorSecret)
    try v.verify(headers(), body: vectorBody, now: vectorTime.addingTimeInterval(300))
    try v.verify(headers(), body: vectorBody, now: vectorTime.addingTimeInterval(-300))
    #expect(throws: VerificationError.timestampTooOld) {
        try v.verify(headers(), body: vectorBody, now: vectorTime.addingTimeInterval(301))
    }
    #expect(throws: VerificationError.timestampInFuture) {
        try v.verify(headers(), body: vectorBody, now: vectorTime.addingTimeInterval(-301))
    }
}

@Test func namesTheMissingHeader() throws {
    let v = try verifier(vectorSecret)
    #expect(throws: VerificationError.missingHeader("webhook-id")) {
        try v.verify(.init(id: nil, timestamp: "1", signature: "v1,x"), body: vectorBody, now: vectorTime)
    }
    #expect(throws: VerificationError.missingHeader("webhook-timestamp")) {
        try v.verify(.init(id: "a", timestamp: nil, signature: "v1,x"), body: vectorBody, now: vectorTime)
    }
    #expect(throws: VerificationError.missingHeader("webhook-signature")) {
        try v.verify(.init(id: "a", timestamp: "1", signature: nil), body: vectorBody, now: vectorTime)
    }
    #expect(throws: VerificationError.invalidTimestamp) {
        try v.verify(.init(id: "a", timestamp: "soon", signature: "v1,x"), body: vectorBody, now: vectorTime)
    }
}

@Test func refusesSecretsThatAreNotBase64() {
    #expect(throws: VerificationError.invalidSecret) { try WebhookSecret("whsec_not base64!") }
    #expect(throws: VerificationError.invalidSecret) { try WebhookSecret("whsec_c2hvcnQ=") }
}

@Test func neverPrintsTheSecret() throws {
    let secret = try WebhookSecret(vectorSecret)
    #expect(!"\(secret)".contains("MfKQ9r8"))
}

// MARK: Cost bounded by the configuration, not the caller

@Test func aHeaderWithThousandsOfEntriesIsRefusedBeforeAnyMAC() throws {
    let forged = Array(repeating: "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", count: 5000).joined(separator: " ")
    #expect(throws: VerificationError.tooManySignatures) {
        try StandardWebhookVerifier.candidates(in: forged)
    }
    #expect(throws: VerificationError.tooManySignatures) {
        try verifier(vectorSecret).verify(headers(signature: forged + " " + vectorSignature), body: vectorBody, now: vectorTime)
    }
}

@Test func entriesThatCannotBeASHA256MACAreSkipped() throws {
    let header = "v1,c2hvcnQ= v1,!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!! v1,\(String(repeating: "A", count: 88)) v2,x \(vectorSignature)"
    #expect(try StandardWebhookVerifier.candidates(in: header).count == 1)
    try verifier(vectorSecret).verify(headers(signature: header), body: vectorBody, now: vectorTime)
}

@Test func upToTheCapEveryEntryIsACandidate() throws {
    let wrong = Array(repeating: "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", count: StandardWebhookVerifier.maximumEntries - 1)
    let header = (wrong + [vectorSignature]).joined(separator: " ")
    #expect(try StandardWebhookVerifier.candidates(in: header).count == StandardWebhookVerifier.maximumEntries)
    try verifier(WebhookSecret.generate(), WebhookSecret.generate(), vectorSecret).verify(
        headers(signature: header), body: vectorBody, now: vectorTime)
}
