import FCMEmulator
import Foundation
import Testing

@testable import RelayServer

/// `tracing.otlpEndpoint`: the URL spans go to, and the `OTEL_*` values refused at start (swift-otel would stop the
/// process on them instead).
@Suite struct TracingConfigurationTests {
    let key: String

    init() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-tracing-config-\(UUID().uuidString).json")
        try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "http://127.0.0.1:1/token", state: EmulatorState()).write(to: path)
        key = path.path
    }

    func load(_ tracing: String, environment: [String: String] = [:]) throws(ConfigurationError) -> RelaySettings {
        try ConfigurationLoader(environment: environment).load(
            yaml: """
                webhook: {secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
                fcm: {credentialsFile: "\(key)"}
                \(tracing)
                """)
    }

    func refusedKeys(_ tracing: String, environment: [String: String] = [:]) -> [String] {
        do {
            _ = try load(tracing, environment: environment)
            return []
        } catch {
            return error.all.map(\.key)
        }
    }

    @Test func offByDefault() throws {
        #expect(try load("").tracing == nil)
    }

    @Test(arguments: [
        ("http://localhost:4318", "http://localhost:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://otlp.example.com/v1/traces", "https://otlp.example.com/v1/traces"),
        ("https://gateway.example.com/otlp/custom", "https://gateway.example.com/otlp/custom"),
    ])
    func theOTLPPathIsAddedToABareAddress(_ given: String, _ used: String) throws {
        #expect(try load("tracing: {otlpEndpoint: \"\(given)\"}").tracing?.tracesURL == used)
    }

    @Test func theVariableSetsIt() throws {
        let settings = try load("", environment: ["RC_RELAY_TRACING_OTLP_ENDPOINT": "http://127.0.0.1:4318"])
        #expect(settings.tracing?.tracesURL == "http://127.0.0.1:4318/v1/traces")
    }

    @Test(arguments: ["grpc://collector:4317", "collector:4318", "http://", "ftp://collector/", "http://collector:4318/?a=b"])
    func notAnHTTPURL(_ endpoint: String) {
        #expect(refusedKeys("tracing: {otlpEndpoint: \"\(endpoint)\"}") == ["tracing.otlpEndpoint"])
    }

    @Test func aSectionWithoutAnEndpoint() {
        #expect(refusedKeys("tracing: {}") == ["tracing.otlpEndpoint"])
        #expect(refusedKeys("tracing: {otlpEndpont: \"http://x\"}").contains("tracing.otlpEndpont"))
    }

    @Test(arguments: [
        ("OTEL_PROPAGATORS", "tracecontext,b3"), ("OTEL_PROPAGATORS", "baggage"), ("OTEL_TRACES_SAMPLER", "xray"),
        ("OTEL_TRACES_SAMPLER", "parentbased_jaeger_remote"), ("OTEL_TRACES_EXPORTER", "console"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
    ])
    func otelValuesSwiftOTelWouldStopOnAreRefused(_ name: String, _ value: String) {
        #expect(refusedKeys("tracing: {otlpEndpoint: \"http://localhost:4318\"}", environment: [name: value]) == [name])
        // Without tracing, the variables are not rc-relay's business.
        #expect(refusedKeys("", environment: [name: value]) == [])
    }

    @Test func otelValuesItHonoursPass() throws {
        let environment = [
            "OTEL_PROPAGATORS": "tracecontext", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": "relay-eu",
        ]
        #expect(try load("tracing: {otlpEndpoint: \"http://localhost:4318\"}", environment: environment).tracing != nil)
    }

    @Test func aChangeNeedsARestart() throws {
        let off = try load("")
        let on = try load("tracing: {otlpEndpoint: \"http://localhost:4318\"}")
        #expect(RelaySettings.restartRequired(off, on) == ["tracing.otlpEndpoint"])
    }
}
