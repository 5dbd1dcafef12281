import Foundation

extension ConfigurationLoader {
    /// `tracing.otlpEndpoint`, and the `OTEL_*` variables that swift-otel would stop the process on rather than refuse
    /// (values it does not implement): checked here, so a mistake is a configuration error like any other.
    func resolveTracing(_ tracing: ConfigurationFile.Tracing?) throws(ConfigurationError) -> RelaySettings.TracingSettings? {
        guard let tracing else { return nil }
        guard let endpoint = tracing.otlpEndpoint else {
            throw ConfigurationError(
                key: "tracing.otlpEndpoint", problem: "the tracing section names no collector",
                fix: "set it to the collector's OTLP/HTTP address, such as http://localhost:4318, or remove the section")
        }
        guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false, url.query == nil
        else {
            throw ConfigurationError(
                key: "tracing.otlpEndpoint", problem: "'\(endpoint)' is not an http or https URL",
                fix: "write the collector's OTLP/HTTP address, such as http://localhost:4318")
        }
        for (name, allowed) in Self.otelChoices {
            guard let value = environment[name], !value.isEmpty else { continue }
            let given = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if let wrong = given.first(where: { !allowed.contains($0) }) {
                throw ConfigurationError(
                    key: name, problem: "'\(wrong)' is not one rc-relay's tracing supports",
                    fix: "use one of: " + allowed.sorted().joined(separator: ", ") + "; or unset it")
            }
        }
        // The OTLP path is added to a bare address, as OTEL_EXPORTER_OTLP_ENDPOINT's is; a URL with a path is used as is.
        let path = url.path
        return .init(tracesURL: path.isEmpty || path == "/" ? endpoint.trimmingSuffix("/") + "/v1/traces" : endpoint)
    }

    /// The values rc-relay's tracing takes for each `OTEL_*` variable with a fixed set (others are swift-otel's as given).
    static let otelChoices: [String: Set<String>] = [
        "OTEL_PROPAGATORS": ["tracecontext", "none"],
        "OTEL_TRACES_SAMPLER": [
            "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
        ],
        "OTEL_TRACES_EXPORTER": ["otlp", "none"],
        "OTEL_EXPORTER_OTLP_PROTOCOL": ["http/protobuf", "http/json"],
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": ["http/protobuf", "http/json"],
    ]
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}
