import Foundation
import RelayCore
import Testing

/// The realistic samples kept in the repository (`Tests/Fixtures/samples`).
func sample(_ name: String) throws -> Data {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return try Data(contentsOf: root.appendingPathComponent("Tests/Fixtures/samples/\(name)"))
}

let updatedType = "google.firebase.remoteconfig.remoteConfig.v1.updated"
let demoSource = "//firebaseremoteconfig.googleapis.com/projects/demo-project"

private func binaryHeaders(type: String = updatedType, source: String = demoSource) -> EventHeaders {
    EventHeaders(contentType: "application/json", id: "ev-1", source: source, specVersion: "1.0", type: type)
}

// MARK: Tests

@Test func decodesABinaryCloudEvent() throws {
    let event = try EventDecoder.decode(body: try sample("template-version.json"), headers: binaryHeaders())
    #expect(event.format == .cloudEventBinary)
    #expect(event.id == "ev-1")
    #expect(event.project == "demo-project")
    #expect(event.version.versionNumber == 42)
    #expect(event.version.updateUser?.email == "dana@example.com")
    #expect(event.version.updateOrigin == "CONSOLE")
}

@Test func decodesAStructuredCloudEvent() throws {
    let event = try EventDecoder.decode(
        body: try sample("cloudevent-structured.json"),
        headers: EventHeaders(contentType: "application/cloudevents+json; charset=utf-8"))
    #expect(event.format == .cloudEventStructured)
    #expect(event.id == "8d6f3a2e-4b1c-4f0e-9a55-2f1b6c7d9e01")
    #expect(event.project == "demo-project")
    #expect(event.version.versionNumber == 42)
    #expect(event.version.description == "Raise the daily reward for level 5 players")
}

@Test func decodesABareVersionWithANumberOrAString() throws {
    let rollback = try EventDecoder.decode(body: try sample("rollback-version.json"), headers: EventHeaders(contentType: "application/json"))
    #expect(rollback.format == .templateVersion)
    #expect(rollback.project == nil)
    #expect(rollback.version.versionNumber == 43)
    #expect(rollback.version.rollbackSource == 41)
    #expect(rollback.version.updateType == "ROLLBACK")
    let text = try EventDecoder.decode(
        body: Data(#"{"versionNumber":"9007199254740993"}"#.utf8), headers: EventHeaders(contentType: "application/json"))
    #expect(text.version.versionNumber == 9_007_199_254_740_993)
}

@Test func keepsUnknownEnumValuesAndFields() throws {
    let body = Data(#"{"versionNumber":7,"updateType":"SOMETHING_NEW","futureField":{"a":1}}"#.utf8)
    let event = try EventDecoder.decode(body: body, headers: EventHeaders(contentType: "application/json"))
    #expect(event.version.updateType == "SOMETHING_NEW")
}

@Test func readsTheEmulatorSourceAsNoProject() throws {
    let event = try EventDecoder.decode(
        body: Data(#"{"versionNumber":1}"#.utf8),
        headers: binaryHeaders(source: "//firebaseremoteconfig.googleapis.com/projects/_"))
    #expect(event.project == nil)
}

@Test(arguments: [
    (#"{"versionNumber":"#, DecodeError.malformedJSON("not valid JSON")),
    (#"[1,2]"#, DecodeError.malformedJSON("expected a JSON object")),
    (#"{"updateType":"ROLLBACK"}"#, DecodeError.missingVersionNumber),
    (#"{"versionNumber":"forty-two"}"#, DecodeError.invalidField("versionNumber")),
    (#"{"versionNumber":4.5}"#, DecodeError.invalidField("versionNumber")),
])
func refusesBadBareVersions(body: String, expected: DecodeError) {
    #expect(throws: expected) {
        try EventDecoder.decode(body: Data(body.utf8), headers: EventHeaders(contentType: "application/json"))
    }
}

@Test func refusesOtherEventTypesBeforeReadingTheirData() {
    #expect(throws: DecodeError.unknownEventType("google.cloud.storage.object.v1.finalized")) {
        try EventDecoder.decode(body: Data(#"{"bucket":"b"}"#.utf8), headers: binaryHeaders(type: "google.cloud.storage.object.v1.finalized"))
    }
    let structured = Data(#"{"specversion":"1.0","id":"1","source":"x","type":"com.example.other","data":{}}"#.utf8)
    #expect(throws: DecodeError.unknownEventType("com.example.other")) {
        try EventDecoder.decode(body: structured, headers: EventHeaders(contentType: "application/cloudevents+json"))
    }
}

@Test func refusesIncompleteCloudEvents() {
    #expect(throws: DecodeError.missingAttribute("specversion")) {
        try EventDecoder.decode(
            body: Data(#"{"versionNumber":1}"#.utf8), headers: EventHeaders(contentType: "application/json", id: "x", type: updatedType))
    }
    #expect(throws: DecodeError.unsupportedSpecVersion("0.3")) {
        try EventDecoder.decode(
            body: Data(#"{"versionNumber":1}"#.utf8),
            headers: EventHeaders(contentType: "application/json", id: "x", source: demoSource, specVersion: "0.3", type: updatedType))
    }
    #expect(throws: DecodeError.invalidSource("//pubsub.googleapis.com/projects/p/topics/t")) {
        try EventDecoder.decode(
            body: Data(#"{"versionNumber":1}"#.utf8), headers: binaryHeaders(source: "//pubsub.googleapis.com/projects/p/topics/t"))
    }
    let noData = Data(#"{"specversion":"1.0","id":"1","source":"\#(demoSource)","type":"\#(updatedType)"}"#.utf8)
    #expect(throws: DecodeError.self) {
        try EventDecoder.decode(body: noData, headers: EventHeaders(contentType: "application/cloudevents+json"))
    }
}

@Test(arguments: [nil, "text/plain", "application/x-www-form-urlencoded", "application/cloudevents-batch+json"])
func refusesOtherContentTypes(contentType: String?) {
    #expect(throws: DecodeError.unsupportedContentType(contentType)) {
        try EventDecoder.decode(body: Data(#"{"versionNumber":1}"#.utf8), headers: EventHeaders(contentType: contentType))
    }
}

@Test func decodesAPubSubPushEnvelope() throws {
    let event = try PubSubDecoder.decode(body: try sample("pubsub-push.json"), contentType: "application/json")
    #expect(event.format == .pubSub)
    #expect(event.id == "2070443601311540")
    #expect(event.project == "demo-project")
    #expect(event.version.versionNumber == 42)
    #expect(event.version.updateUser?.imageUrl == "https://example.com/dana.png")
}

@Test func aPubSubPushCarriesItsPublishersTraceContext() throws {
    let version = Data(#"{"versionNumber":1}"#.utf8).base64EncodedString()
    let traced =
        #"{"message":{"messageId":"1","data":"\#(version)","attributes":{"googclient_traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","googclient_tracestate":"a=1"}}}"#
    let event = try PubSubDecoder.decode(body: Data(traced.utf8), contentType: "application/json")
    #expect(event.traceParent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    #expect(event.traceState == "a=1")
    let plain = try PubSubDecoder.decode(body: try sample("pubsub-push.json"), contentType: "application/json")
    #expect(plain.traceParent == nil && plain.traceState == nil)
}

/// google-cloud.md: a publisher may set only `ce-type` and `ce-source`; the version and the id come with the message.
@Test func aPubSubMessageMayNameOnlyTheEventsTypeAndSource() throws {
    let version = Data(#"{"versionNumber":7}"#.utf8).base64EncodedString()
    let other = "//firebaseremoteconfig.googleapis.com/projects/other-project"
    let body = #"{"message":{"messageId":"m-1","data":"\#(version)","attributes":{"ce-type":"\#(updatedType)","ce-source":"\#(other)"}}}"#
    let event = try PubSubDecoder.decode(body: Data(body.utf8), contentType: "application/json")
    #expect(event.id == "m-1" && event.project == "other-project" && event.version.versionNumber == 7)
    // What is given is still checked: another version of CloudEvents, or another type, is refused.
    let old =
        #"{"message":{"messageId":"m-2","data":"\#(version)","attributes":{"ce-specversion":"0.3","ce-type":"\#(updatedType)","ce-source":"\#(other)"}}}"#
    #expect(throws: DecodeError.unsupportedSpecVersion("0.3")) { try PubSubDecoder.decode(body: Data(old.utf8), contentType: "application/json") }
    let typeOnly = #"{"message":{"messageId":"m-3","data":"\#(version)","attributes":{"ce-type":"other.type"}}}"#
    #expect(throws: DecodeError.unknownEventType("other.type")) {
        try PubSubDecoder.decode(body: Data(typeOnly.utf8), contentType: "application/json")
    }
}

@Test func refusesBadPubSubEnvelopes() {
    let version = Data(#"{"versionNumber":1}"#.utf8).base64EncodedString()
    let cases: [(String, DecodeError)] = [
        (#"{"versionNumber":1}"#, .invalidEnvelope(#"expected {"message": {"data", "messageId"}, "subscription"}"#)),
        (#"{"message":{"data":"\#(version)"}}"#, .invalidEnvelope("message.messageId is missing")),
        (#"{"message":{"messageId":"1","data":"%%%"}}"#, .invalidEnvelope("message.data is missing or not base64")),
        (#"{"message":{"messageId":"1","data":"\#(Data("{}".utf8).base64EncodedString())"}}"#, .missingVersionNumber),
        (
            #"{"message":{"messageId":"1","data":"\#(version)","attributes":{"ce-specversion":"1.0","ce-id":"x","ce-source":"s","ce-type":"other.type"}}}"#,
            .unknownEventType("other.type")
        ),
    ]
    for (body, expected) in cases {
        #expect(throws: expected) { try PubSubDecoder.decode(body: Data(body.utf8), contentType: "application/json") }
    }
}

@Test func aSourceIsReadAsBytesSoACombiningMarkAfterTheSlashIsStillAProject() throws {
    // "/" followed by an emoji modifier is one grapheme: a Character-wise prefix check would miss the slash.
    let event = try EventDecoder.decode(
        body: Data(#"{"versionNumber":"1"}"#.utf8), headers: binaryHeaders(source: "//firebaseremoteconfig.googleapis.com/projects/\u{1F3FB}a"))
    #expect(event.project == "\u{1F3FB}a")
    #expect(throws: DecodeError.self) {
        try EventDecoder.decode(
            body: Data(#"{"versionNumber":"1"}"#.utf8), headers: binaryHeaders(source: "//firebaseremoteconfig.googleapis.com/projects/a/b"))
    }
}

@Test func versionNumbersAreAnOptionalMinusAndOneToNineteenDigitsWithinInt64() throws {
    // int64 as Google's JSON mapping writes it, a string or a number, up to 9223372036854775807 either way.
    for good in [#""42""#, "42", #""-7""#, #""123456789012345678""#, #""9223372036854775807""#, "9223372036854775807"] {
        #expect(
            try EventDecoder.decode(body: Data(#"{"versionNumber":\#(good)}"#.utf8), headers: binaryHeaders()).version.versionNumber != 0
                || good.contains("0"))
    }
    for bad in [#""+5""#, #"" 5""#, #""""#, #""9223372036854775808""#, "9223372036854775808", #""12345678901234567890""#, #""5x""#] {
        #expect(throws: DecodeError.self, "\(bad)") {
            try EventDecoder.decode(body: Data(#"{"versionNumber":\#(bad)}"#.utf8), headers: binaryHeaders())
        }
    }
}

/// Issue 32, defect 5: an id with a control character is refused where it is decoded, in every mode (PostgreSQL
/// cannot keep a NUL, and no sender makes such an id).
@Test func idsWithControlCharactersAreRefusedWhereverTheyCome() {
    for id in ["a\u{0}b", "line\nbreak", "tab\tid", "del\u{7F}", "c1\u{85}"] {
        #expect(throws: DecodeError.idHasControlCharacter("the CloudEvent id")) {
            try EventDecoder.decode(
                body: Data(#"{"versionNumber":1}"#.utf8),
                headers: EventHeaders(contentType: "application/json", id: id, source: demoSource, specVersion: "1.0", type: updatedType))
        }
        let escaped = String(data: try! JSONEncoder().encode(id), encoding: .utf8)!
        let structured = #"{"specversion":"1.0","type":"\#(updatedType)","id":\#(escaped),"source":"\#(demoSource)","data":{"versionNumber":"1"}}"#
        #expect(throws: DecodeError.idHasControlCharacter("the CloudEvent id")) {
            try EventDecoder.decode(body: Data(structured.utf8), headers: EventHeaders(contentType: "application/cloudevents+json"))
        }
        let version = Data(#"{"versionNumber":1}"#.utf8).base64EncodedString()
        #expect(throws: DecodeError.idHasControlCharacter("message.messageId")) {
            try PubSubDecoder.decode(
                body: Data(#"{"message":{"messageId":\#(escaped),"data":"\#(version)"},"subscription":"s"}"#.utf8), contentType: "application/json")
        }
    }
    #expect(throws: Never.self) { try EventDecoder.checkID("ordinary-id é 🚀", name: "id") }
}

// MARK: Protobuf's JSON mapping, as Google's libraries write it

private func bare(_ json: String) throws -> TemplateVersion {
    try EventDecoder.decode(body: Data(json.utf8), headers: EventHeaders(contentType: "application/json")).version
}

@Test func readsEnumsSentAsNumbersAsGoogleEventsWritesThemByDefault() throws {
    // `RemoteConfigEventData(...).to_json()` from google-events, byte for byte.
    let version = try bare(
        #"{"versionNumber": "42", "updateTime": "2026-11-26T08:00:00.123456Z", "updateUser": {"name": "A", "email": "a@b.c", "imageUrl": "http://x"}, "description": "d", "updateOrigin": 3, "updateType": 3, "rollbackSource": "40"}"#
    )
    #expect(version.updateOrigin == "ADMIN_SDK_NODE")
    #expect(version.updateType == "ROLLBACK")
    #expect(version.rollbackSource == 40)
    #expect(try bare(#"{"versionNumber":1,"updateType":0,"updateOrigin":1}"#).updateType == "REMOTE_CONFIG_UPDATE_TYPE_UNSPECIFIED")
    // Proto3's defaults, as google-events writes them for a publish: no rollback source.
    #expect(try bare(#"{"versionNumber":"5","rollbackSource":"0","description":""}"#).rollbackSource == nil)
    // A number written as a string is the number, as protobuf's parsers read it.
    #expect(try bare(#"{"versionNumber":1,"updateType":"3","updateOrigin":"1"}"#).updateType == "ROLLBACK")
    // A number Google adds later is kept as the number.
    #expect(try bare(#"{"versionNumber":1,"updateType":9}"#).updateType == "9")
}

@Test func readsTheOriginalProtoFieldNames() throws {
    let version = try bare(
        #"{"version_number": "42", "update_time": "2026-11-26T08:00:00Z", "update_user": {"email": "a@b.c", "image_url": "http://x"}, "update_origin": "CONSOLE", "update_type": "ROLLBACK", "rollback_source": "40", "unknown_later": [1]}"#
    )
    #expect(
        version
            == TemplateVersion(
                versionNumber: 42, updateTime: "2026-11-26T08:00:00Z", updateUser: .init(email: "a@b.c", imageUrl: "http://x"),
                updateOrigin: "CONSOLE", updateType: "ROLLBACK", rollbackSource: 40))
}

@Test func refusesAFieldGivenUnderBothItsNames() {
    #expect(throws: DecodeError.fieldGivenTwice("'versionNumber' is given twice, as 'versionNumber' and 'version_number'")) {
        try bare(#"{"versionNumber": 1, "version_number": 2}"#)
    }
    #expect(throws: DecodeError.self) { try bare(#"{"versionNumber": 1, "updateType": true}"#) }
    #expect(throws: DecodeError.invalidField("version_number")) { try bare(#"{"version_number": "x"}"#) }
    #expect(throws: DecodeError.missingVersionNumber) { try bare(#"{"update_type": "ROLLBACK"}"#) }
}

@Test(arguments: [
    ("2026-11-26T10:00:00.123456+02:00", "2026-11-26T08:00:00.123456Z"),
    ("2026-11-26T08:00:00Z", "2026-11-26T08:00:00Z"),
    ("2026-01-01t00:30:00-01:00", "2026-01-01T01:30:00Z"),
    ("2026-03-01T00:15:00.5+00:30", "2026-02-28T23:45:00.5Z"),
    ("2024-03-01T00:15:00+00:30", "2024-02-29T23:45:00Z"),
    ("1999-12-31T23:59:59.999999999-00:01", "2000-01-01T00:00:59.999999999Z"),
    ("not a time", "not a time"),
    ("2026-11-26T08:00:00.1234567891Z", "2026-11-26T08:00:00.1234567891Z"),
])
func keepsUpdateTimeInUTC(sent: String, kept: String) throws {
    #expect(try bare(#"{"versionNumber":1,"updateTime":"\#(sent)"}"#).updateTime == kept)
}

@Test func aStructuredEventsDataMayBeJSONTextOrBase64AsTheCloudEventsSDKsWriteIt() throws {
    let attributes = #""specversion":"1.0","id":"e1","type":"\#(updatedType)","source":"\#(demoSource)""#
    let version = #"{"versionNumber":"42","updateType":3}"#
    let text = try JSONSerialization.data(withJSONObject: ["data": version])
    let asText = String(decoding: text, as: UTF8.self).dropLast() + "," + attributes + "}"
    let base64 = "{" + attributes + #","data_base64":"\#(Data(version.utf8).base64EncodedString())"}"#
    for body in [String(asText), base64] {
        let event = try EventDecoder.decode(body: Data(body.utf8), headers: EventHeaders(contentType: "application/cloudevents+json"))
        #expect(event.version.versionNumber == 42 && event.version.updateType == "ROLLBACK", "\(body)")
    }
    #expect(throws: DecodeError.malformedJSON("'data_base64' is not base64")) {
        try EventDecoder.decode(
            body: Data(("{" + attributes + #","data_base64":"%%%"}"#).utf8), headers: EventHeaders(contentType: "application/cloudevents+json"))
    }
}

/// `checkID` answers printable ASCII without looking at scalars (issue #35): the same answer as the scalar check, for
/// every ASCII byte and at the length limit.
@Test func idCheckOfPlainASCIIAnswersAsTheScalarCheck() {
    func scalarCheck(_ id: String) -> DecodeError? {
        if id.unicodeScalars.count > EventDecoder.maximumIDLength { return .idTooLong("id") }
        if id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) { return .idHasControlCharacter("id") }
        return nil
    }
    func answer(_ id: String) -> DecodeError? {
        do throws(DecodeError) {
            try EventDecoder.checkID(id, name: "id")
            return nil
        } catch {
            return error
        }
    }
    var ids: [String] = []
    for byte in UInt8(0)...UInt8(0x7F) {
        let character = String(decoding: [byte], as: UTF8.self)
        ids += ["id" + character, character, String(repeating: "a", count: 255) + character]
    }
    for count in [255, 256, 257] { ids += [String(repeating: "x", count: count), String(repeating: "é", count: count)] }
    ids.append(String(repeating: "a", count: 256) + "\u{85}")
    for id in ids { #expect(answer(id) == scalarCheck(id), "\(id.utf8.map { $0 })") }
    #expect(answer(String(repeating: "a", count: 256)) == nil)
    #expect(answer(String(repeating: "a", count: 257)) == .idTooLong("id"))
    #expect(answer("del\u{7F}") == .idHasControlCharacter("id"))
}
