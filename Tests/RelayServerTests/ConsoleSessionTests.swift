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

@Test func failedSignInsAreSlowedPerAddressAndForgottenAfterTheWindow() {
    let sessions = ConsoleSessions()
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    let delays = (0..<8).map { sessions.failed(from: "10.0.0.1", now: start.addingTimeInterval(Double($0))) }
    #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)])
    #expect(sessions.failed(from: "10.0.0.2", now: start) == .milliseconds(250), "per address")
    #expect(sessions.failed(from: "10.0.0.1", now: start.addingTimeInterval(8 + ConsoleSessions.failureWindow)) == .milliseconds(250))
}

@Test func theConsolesTimesAreUTCAndRelative() {
    let now = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15 08:00:00 UTC
    #expect(ConsoleRoutes.when(now.addingTimeInterval(-190), now: now) == "2027-01-15 07:56:50 UTC (3 min ago)")
    #expect(ConsoleRoutes.when(now.addingTimeInterval(2), now: now) == "2027-01-15 08:00:02 UTC (just now)")
    #expect(ConsoleRoutes.relative(now.addingTimeInterval(7200), now: now) == "in 2 h")
}
