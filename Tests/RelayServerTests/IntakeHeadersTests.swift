import HTTPTypes
import RelayCore
import Testing

@testable import RelayServer

/// Intake reads its headers in one pass; each reads exactly as `HTTPFields`' subscript reads it, repeated names and
/// any spelling of a name included; `webhook-signature`'s lines are joined by a space, its entries' separator.
@Test(arguments: [20_261_127, UInt64.random(in: 1...UInt64.max)])
func intakeHeadersReadAsHTTPFieldsReadsThem(seed: UInt64) {
    var generator = SplitMix64(seed: seed)
    let names = [
        "Authorization", "webhook-id", "Webhook-Timestamp", "WEBHOOK-SIGNATURE", "Content-Type", "content-length", "ce-id", "Ce-Source",
        "ce-specversion", "CE-TYPE", "Host", "X-Request-Id", "webhook-ids", "ce",
    ]
    let values = ["", "v1,abc", "Bearer x", "1", "application/json", "a, b", "é"]
    for _ in 0..<2_000 {
        var fields = HTTPFields()
        for _ in 0..<Int(generator.next() % 14) {
            let name = HTTPField.Name(names[Int(generator.next() % UInt64(names.count))])!
            fields.append(HTTPField(name: name, value: values[Int(generator.next() % UInt64(values.count))]))
        }
        let read = IntakeHeaders(fields)
        #expect(read.authorization == fields[.authorization])
        #expect(read.webhookID == fields[.webhookID])
        #expect(read.webhookTimestamp == fields[.webhookTimestamp])
        let signatures = fields[values: .webhookSignature]
        #expect(read.webhookSignature == (signatures.isEmpty ? nil : signatures.joined(separator: " ")))
        #expect(read.contentType == fields[.contentType])
        #expect(read.contentLength == fields[.contentLength])
        #expect(read.ceID == fields[.ceID])
        #expect(read.ceSource == fields[.ceSource])
        #expect(read.ceSpecVersion == fields[.ceSpecVersion])
        #expect(read.ceType == fields[.ceType], "seed \(seed): \(fields)")
    }
}
