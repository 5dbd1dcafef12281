import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// What every console request and answer is checked for or carries: the same-origin check, form fields, and the headers
/// that forbid framing, scripts and caching.
extension ConsoleRoutes {
    /// No `Origin` (an older browser, a test client), or one naming the host the browser addressed: `Host`, or the
    /// `X-Forwarded-Host` a trusted proxy sends, read as `X-Forwarded-For` is (the entry the nearest trusted proxy
    /// added, ``TrustedProxies/resolve(peer:forwardedFor:)``). Host and port are compared without the scheme, the host in
    /// any case, a missing port as the origin scheme's default (`http://relay` is `relay:80`).
    static func sameOrigin(_ request: Request) -> Bool {
        let info = RequestInfo.current
        let forwarded =
            info?.viaTrustedProxy == true
            ? TrustedProxies.forwardedHost(request.headers[values: HTTPField.Name("X-Forwarded-Host")!], hop: info?.forwardedHop ?? 0) : nil
        return sameOrigin(
            origin: request.headers[HTTPField.Name("Origin")!], host: request.head.authority, forwardedHost: forwarded,
            viaTrustedProxy: info?.viaTrustedProxy ?? false)
    }

    /// `forwardedHost`: the one `X-Forwarded-Host` entry that counts, already chosen.
    static func sameOrigin(origin: String?, host: String?, forwardedHost: String?, viaTrustedProxy: Bool) -> Bool {
        guard let origin else { return true }
        guard let url = URL(string: origin), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let originHost = url.host
        else { return false }
        let schemeDefault = scheme == "https" ? 443 : 80
        let expected = (bare(originHost), url.port ?? schemeDefault)
        var addressed: [String] = []
        if viaTrustedProxy, let forwardedHost { addressed.append(forwardedHost) }
        if let host { addressed.append(host) }
        return addressed.contains { hostAndPort($0, defaultPort: schemeDefault).map { $0 == expected } ?? false }
    }

    /// `host[:port]` as a `Host` header writes it (an IPv6 literal in brackets), lower-cased, the port defaulted.
    static func hostAndPort(_ authority: String, defaultPort: Int) -> (String, Int)? {
        guard !authority.isEmpty else { return nil }
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
            let rest = authority[authority.index(after: end)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            let port = rest.isEmpty ? defaultPort : Int(rest.dropFirst())
            return port.map { (bare(String(authority[...end])), $0) }
        }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2 else { return nil }
        let port = parts.count == 2 ? Int(parts[1]) : defaultPort
        return port.map { (bare(String(parts[0])), $0) }
    }

    static func bare(_ host: String) -> String {
        host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
    }

    /// An `application/x-www-form-urlencoded` body (the admin gate bounds its size).
    static func fields(_ request: Request) async throws -> [String: String] {
        var request = request
        return fields(String(buffer: try await request.collectBody(upTo: .max)))
    }

    /// Parsed by hand, never by `URLComponents`: setting its `percentEncodedQuery` to text that is not a valid query
    /// (a raw space, a stray `%`) traps on Linux. What does not decode is an empty value.
    static func fields(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            let name = decode(parts[0])
            guard !name.isEmpty, fields[name] == nil else { continue }
            fields[name] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    static func response(_ status: HTTPResponse.Status, type: String, body: String, cache: String = "no-store") -> Response {
        response(status, type: type, bytes: ByteBuffer(string: body), cache: cache)
    }

    static func response(_ status: HTTPResponse.Status, type: String, bytes body: ByteBuffer, cache: String = "no-store") -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = cache
        headers[HTTPField.Name("Content-Security-Policy")!] = contentSecurityPolicy
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"  // no-referrer would make the browser send Origin: null on its own forms
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    static func redirect(_ location: String) -> Response {
        var response = response(.seeOther, type: "text/plain; charset=utf-8", body: "")
        response.headers[.location] = location
        return response
    }
}
