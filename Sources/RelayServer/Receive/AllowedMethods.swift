import HTTPTypes

/// The methods each path is served with, as `openapi.yaml` declares them, so a known path asked with another method is
/// answered `405` with `Allow` (RFC 9110), not `404`. A test holds this table to the spec.
enum AllowedMethods {
    /// Paths with `{name}` for a variable segment.
    static let table: [String: [HTTPRequest.Method]] = [
        "/webhooks/remote-config": [.post],
        "/pubsub/remote-config": [.post],
        "/healthz": [.get],
        "/readyz": [.get],
        "/metrics": [.get],
        "/admin/info": [.get],
        "/admin/schedules": [.get],
        "/admin/routes": [.get],
        "/admin/preview": [.post],
        "/admin/send": [.post],
        "/admin/deliveries": [.get],
        "/admin/deliveries/{id}": [.get],
        "/admin/deliveries/{id}/retry": [.post],
        "/admin/deliveries/{id}/discard": [.post],
        "/admin/reload": [.post],
        "/admin/projects/{project}/marks": [.delete],
    ]

    private static let patterns: [(segments: [Substring], methods: [HTTPRequest.Method])] = table.map { path, methods in
        (path.split(separator: "/"), methods)
    }

    /// The methods the path takes, or nil when no such path is served. Segments are compared as the router does
    /// (`//healthz` is `/healthz`).
    static func allowed(for path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/")
        for pattern in patterns where pattern.segments.count == segments.count {
            let matches = zip(pattern.segments, segments).allSatisfy { expected, actual in
                expected.hasPrefix("{") || expected == actual
            }
            if matches { return pattern.methods }
        }
        return nil
    }
}
