import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The reverse proxies whose `X-Forwarded-For` is believed, and the client address that follows from it.
///
/// Only when the TCP peer is trusted is the header read, right to left, skipping trusted hops: the first untrusted
/// address is the client. A client cannot forge its way past the proxy, since the proxy appends what it saw.
/// `X-Forwarded-Host` is read the same way, at the same entry (``resolve(peer:forwardedFor:)``, issue #48).
public struct TrustedProxies: Sendable, Equatable {
    /// An IPv4 or IPv6 network: `10.0.0.0/8`, `127.0.0.1`, `::1`, `fd00::/8`.
    public struct Range: Sendable, Equatable {
        let address: [UInt8]
        let prefix: Int

        public init?(_ text: String) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2, let address = TrustedProxies.bytes(of: String(parts[0])) else { return nil }
            let bits = address.count * 8
            if parts.count == 2 {
                guard let prefix = Int(parts[1]), (0...bits).contains(prefix) else { return nil }
                self.prefix = prefix
            } else {
                self.prefix = bits
            }
            self.address = address
        }

        func contains(_ other: [UInt8]) -> Bool {
            guard other.count == address.count else { return false }
            var left = prefix
            for (a, b) in zip(address, other) where left > 0 {
                let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
                if a & mask != b & mask { return false }
                left -= 8
            }
            return true
        }
    }

    let ranges: [Range]

    public init(_ ranges: [Range] = []) { self.ranges = ranges }

    func trusts(_ address: String) -> Bool {
        guard !ranges.isEmpty, let bytes = Self.bytes(of: address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// The client's address: the peer's own, unless the peer is a trusted proxy and says otherwise.
    /// `forwardedFor` is read only when the peer is trusted (no header scan per request otherwise).
    public func client(peer: String?, forwardedFor headers: @autoclosure () -> [String]) -> String? {
        resolve(peer: peer, forwardedFor: headers()).client
    }

    /// The client's address, and which `X-Forwarded-*` entry names it, counted from the right (0: the last entry, the
    /// one the peer added). Read right to left: the last entry is what the nearest proxy (the peer, trusted) saw;
    /// while it is a trusted proxy's own address, the entry before it, which that proxy added, is read. The peer's own
    /// address (no header, or an entry that is not an address) is hop 0: `X-Forwarded-Host` is then read by its last
    /// entry, the peer's.
    func resolve(peer: String?, forwardedFor headers: @autoclosure () -> [String]) -> (client: String?, hop: Int) {
        guard let peer, trusts(peer) else { return (peer, 0) }
        let forwardedFor = headers()
        guard !forwardedFor.isEmpty else { return (peer, 0) }
        let hops = Self.entries(forwardedFor)
        var nearest = (client: peer, hop: 0)
        for (hop, entry) in hops.reversed().enumerated() {
            let address = Self.address(entry)
            // Anything unparsable is where trust ends: the nearest trusted address is reported, not a forgery.
            guard !address.isEmpty, Self.bytes(of: address) != nil else { return nearest }
            if !trusts(address) { return (address, hop) }
            nearest = (address, hop)
        }
        return nearest
    }

    /// The comma-separated entries of a header's lines, in order, trimmed.
    static func entries(_ lines: [String]) -> [String] {
        lines.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// The `X-Forwarded-Host` entry at `hop` from the right: the host the client addressed, as the proxy that added the
    /// client's `X-Forwarded-For` entry saw it; nil when there is no such entry.
    static func forwardedHost(_ lines: [String], hop: Int) -> String? {
        let entries = entries(lines)
        guard hop < entries.count else { return nil }
        let entry = entries[entries.count - 1 - hop]
        return entry.isEmpty ? nil : entry
    }

    /// A hop without its port: `1.2.3.4:5678` and `[2001:db8::1]:443` as some proxies write them.
    static func address(_ hop: String) -> String {
        if hop.hasPrefix("["), let end = hop.firstIndex(of: "]") { return String(hop[hop.index(after: hop.startIndex)..<end]) }
        if hop.filter({ $0 == ":" }).count == 1, let colon = hop.firstIndex(of: ":") { return String(hop[..<colon]) }
        return hop
    }

    /// The address's bytes (4 or 16), or nil if it is not an IP address. IPv4-mapped IPv6 counts as IPv4.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12...]) }
        return bytes
    }
}
