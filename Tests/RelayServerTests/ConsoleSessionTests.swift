import Foundation
import Testing

@testable import RelayServer

// The operator's page's sessions, on explicit times: a session is the token's, ends with it, and guessing is slowed.

@Test func aSessionEndsWithItsTokenItsLifetimeOrASignOut() throws {
    let sessions = ConsoleSessions(lifetime: 3600)
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    #expect(sessions.signIn(token: "wrong", tokens: ["a-token", "b-token"], now: start) == nil)
    #expect(sessions.signIn(token: "", tokens: ["a-token"], now: start) == nil)
    let session = try #require(sessions.signIn(token: "a-token", tokens: ["a-token", "b-token"], now: start))
    #expect(session.id.count == 64 && session.csrf.count == 64 && session.id != session.csrf)
    #expect(!session.id.contains("a-token") && !session.csrf.contains("a-token"))
    #expect(sessions.session(session.id, tokens: ["a-token", "b-token"], now: start.addingTimeInterval(3599))?.id == session.id)
    // The token is rotated out: the session is gone, and stays gone if the token comes back.
    #expect(sessions.session(session.id, tokens: ["b-token"], now: start) == nil)
    #expect(sessions.session(session.id, tokens: ["a-token"], now: start) == nil)
    let second = try #require(sessions.signIn(token: "b-token", tokens: ["b-token"], now: start))
    #expect(sessions.session(second.id, tokens: ["b-token"], now: start.addingTimeInterval(3600)) == nil, "its lifetime is over")
    let third = try #require(sessions.signIn(token: "b-token", tokens: ["b-token"], now: start))
    sessions.signOut(third.id)
    #expect(sessions.session(third.id, tokens: ["b-token"], now: start) == nil)
    #expect(sessions.session(nil, tokens: ["b-token"]) == nil && sessions.session("", tokens: ["b-token"]) == nil)
}

@Test func aFormNeedsTheSessionsOwnCSRFToken() throws {
    let sessions = ConsoleSessions()
    let session = try #require(sessions.signIn(token: "a-token", tokens: ["a-token"]))
    let other = try #require(sessions.signIn(token: "a-token", tokens: ["a-token"]))
    #expect(ConsoleSessions.csrfMatches(session.csrf, session))
    #expect(!ConsoleSessions.csrfMatches(nil, session) && !ConsoleSessions.csrfMatches("", session))
    #expect(!ConsoleSessions.csrfMatches(other.csrf, session), "another session's token is not this one's")
}

@Test func throttleKeysCountIPv6ByItsSlash64AndMappedIPv4AsItself() {
    #expect(GuessThrottle.key("2001:db8:1:2:a::1") == "2001:db8:1:2::/64")
    #expect(GuessThrottle.key("2001:db8:1:2::ff") == "2001:db8:1:2::/64")
    #expect(GuessThrottle.key("2001:db8::1") == "2001:db8:0:0::/64")
    #expect(GuessThrottle.key("192.0.2.7") == "192.0.2.7")
    // Issue 32, defect 7: IPv4 clients of a listener bound to `::` arrive IPv4-mapped; each is its own client.
    #expect(GuessThrottle.key("::ffff:192.0.2.7") == "192.0.2.7")
    #expect(GuessThrottle.key("::ffff:198.51.100.1") == "198.51.100.1")
    #expect(GuessThrottle.key("[2001:db8::1]:443") == "2001:db8:0:0::/64")
}

@Test func formBodiesAreParsedWithoutTrappingOnAnything() {
    #expect(ConsoleRoutes.fields("token=a+b%21&csrf=x") == ["token": "a b!", "csrf": "x"])
    // What URLComponents traps on: a raw space, a stray %, #, quotes, brackets, invalid escapes.
    #expect(ConsoleRoutes.fields("token=a b") == ["token": "a b"])
    #expect(ConsoleRoutes.fields("token=%zz&x=%") == ["token": "", "x": ""])
    #expect(ConsoleRoutes.fields("token=#\"<>&&=&==") == ["token": "#\"<>"])
    #expect(ConsoleRoutes.fields("token=%C3%28") == ["token": ""], "invalid UTF-8 decodes to nothing")
    #expect(ConsoleRoutes.fields("token=first&token=second") == ["token": "first"])
}

@Test func theConsoleEscapesByUnicodeScalarNotByCharacter() {
    // A quote followed by a combining accent is one Character that is not a quote: escaped by scalar, it is.
    let html = ConsoleTemplates.render("deliveries", ["route": "\"\u{301} autofocus onfocus=x", "project": "<b>&'"])
    #expect(html.contains("value=\"&quot;\u{301} autofocus onfocus=x\""))
    #expect(html.contains("&lt;b&gt;&amp;&#39;"))
    #expect(!html.contains("<b>"))
}

@Test func theConsolesTimesAreUTCAndRelative() {
    let now = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15 08:00:00 UTC
    #expect(ConsoleRoutes.when(now.addingTimeInterval(-190), now: now) == "2027-01-15 07:56:50 UTC (3 min ago)")
    #expect(ConsoleRoutes.when(now.addingTimeInterval(2), now: now) == "2027-01-15 08:00:02 UTC (just now)")
    #expect(ConsoleRoutes.relative(now.addingTimeInterval(7200), now: now) == "in 2 h")
}

/// Issue 32, defect 9: the sign-in's same-origin check behind a proxy on a non-default port.
@Test func theOriginIsComparedByHostAndPortWithThePortDefaulted() {
    func same(_ origin: String?, _ host: String?, forwarded: String? = nil, trusted: Bool = false) -> Bool {
        ConsoleRoutes.sameOrigin(origin: origin, host: host, forwardedHost: forwarded, viaTrustedProxy: trusted)
    }
    #expect(same(nil, "relay:8080"))  // no Origin: an older browser, a script
    #expect(same("http://127.0.0.1:8443", "127.0.0.1:8443"))
    #expect(same("http://LOCALHOST:8443", "localhost:8443"))
    #expect(same("http://localhost:8443", "LOCALHOST:8443"))
    #expect(same("https://relay.example.com", "relay.example.com"))
    #expect(same("https://relay.example.com", "relay.example.com:443"))
    #expect(same("http://relay.example.com", "relay.example.com:80"))
    #expect(same("http://[::1]:8080", "[::1]:8080"))
    // nginx's `Host $host` drops the port: only a trusted proxy's X-Forwarded-Host can say which one was addressed.
    #expect(!same("https://127.0.0.1:8443", "127.0.0.1"))
    #expect(same("https://127.0.0.1:8443", "127.0.0.1", forwarded: "127.0.0.1:8443", trusted: true))
    #expect(!same("https://127.0.0.1:8443", "127.0.0.1", forwarded: "127.0.0.1:8443", trusted: false))
    #expect(same("https://relay.example.com:8443", "10.0.0.5:8080", forwarded: "relay.example.com:8443", trusted: true))
    // Another origin, scheme or port is refused.
    #expect(!same("https://evil.example", "relay.example.com"))
    #expect(!same("https://relay.example.com:444", "relay.example.com"))
    #expect(!same("http://relay.example.com", "relay.example.com:443"))
    #expect(!same("null", "relay.example.com"))
    #expect(!same("ftp://relay.example.com", "relay.example.com"))
}
