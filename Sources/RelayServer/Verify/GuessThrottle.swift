import DeliveryEngine
import NIOConcurrencyHelpers

/// Slows down guessing of admin tokens, through `/admin/` bearer tokens and the operator's page's sign-in alike, per
/// client (``key(_:)``), without ever locking a right token out (issue #48):
///
/// - A client with no wrong token in the last 15 minutes, and no attempt waiting, is checked at once, however many
///   attempts it makes in parallel.
/// - Each wrong token puts the client's next turn later: 0.25 s after its first failure, doubling with each one, at
///   most ``maximumDelay``. An attempt that arrives before the client's next turn waits for a turn of its own; turns
///   are spaced as if every waiting attempt were wrong, so a burst sent all at once is slowed as the same attempts
///   sent one after another would be.
/// - No attempt waits longer than ``maximumDelay``, whatever else its client sends: then its token is checked, and if
///   it is right, it is accepted (a right token forgets its client's failures). So a guesser gets through at most one
///   guess per parallel request per 8 s, and the owner behind the same address waits 8 s at most.
/// - Each attempt ends its own turn only; time is the injected ``DeliveryClock``'s, and a wait is one timer on it.
final class GuessThrottle: Sendable {
    static let window: Duration = .seconds(900)
    static let firstDelay: Duration = .milliseconds(250)
    static let maximumDelay: Duration = .seconds(8)
    /// Clients remembered at most; the one whose last failure is oldest is forgotten first.
    static let capacity = 10_000

    private struct Client {
        /// Wrong tokens within ``window`` of the last one.
        var failures = 0
        var lastFailure: Duration = .zero
        /// The earliest instant the next attempt may be checked.
        var nextTurn: Duration = .zero
        /// Attempts waiting for their turn.
        var waiting = 0
    }

    private let clock: any DeliveryClock
    private let clients = NIOLockedValueBox<[String: Client]>([:])

    init(clock: any DeliveryClock) { self.clock = clock }

    /// What an attempt came to, and how long it waited for its turn.
    struct Outcome: Sendable, Equatable {
        var accepted: Bool
        var waited: Duration
    }

    /// `isRight` checked in the client's turn: at once, or after the wait its client's failures earned.
    func attempt(from client: String, _ isRight: () -> Bool) async -> Outcome {
        let start = clock.instant()
        // Checked at once, or a turn taken.
        var turn: Duration?
        if let accepted = clients.withLockedValue({ clients -> Bool? in
            var record = Self.current(clients[client], at: start)
            if record.nextTurn <= start, record.waiting == 0 {
                let accepted = Self.settle(isRight(), &record, at: start)
                clients[client] = record
                Self.bound(&clients, keeping: client)
                return accepted
            }
            let mine = min(max(record.nextTurn, start), start + Self.maximumDelay)
            record.waiting += 1
            record.nextTurn = max(record.nextTurn, mine + Self.delay(after: record.failures + record.waiting))
            clients[client] = record
            turn = mine
            return nil
        }) {
            return Outcome(accepted: accepted, waited: .zero)
        }
        let wait = turn! - start
        await withCheckedContinuation { (resumed: CheckedContinuation<Void, Never>) in
            _ = clock.schedule(after: wait) { resumed.resume() }
        }
        let now = clock.instant()
        let accepted = clients.withLockedValue { clients in
            var record = Self.current(clients[client], at: now)
            record.waiting = max(record.waiting - 1, 0)
            let accepted = Self.settle(isRight(), &record, at: now)
            clients[client] = record
            Self.bound(&clients, keeping: client)
            return accepted
        }
        return Outcome(accepted: accepted, waited: now - start)
    }

    /// The client's record with failures older than the window forgotten.
    private static func current(_ record: Client?, at now: Duration) -> Client {
        var record = record ?? Client()
        if record.failures > 0, now - record.lastFailure >= window {
            record.failures = 0
        }
        return record
    }

    /// Records the check's result: a failure moves the next turn on; a success forgets the failures.
    private static func settle(_ right: Bool, _ record: inout Client, at now: Duration) -> Bool {
        if right {
            record.failures = 0
            record.nextTurn = min(record.nextTurn, now)
        } else {
            record.failures += 1
            record.lastFailure = now
            record.nextTurn = max(record.nextTurn, now + delay(after: record.failures))
        }
        return right
    }

    /// The wait after `failures` wrong tokens: none, then 0.25 s, doubling, at most ``maximumDelay``.
    static func delay(after failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        return min(firstDelay * (1 << min(failures - 1, 10)), maximumDelay)
    }

    /// Forgets clients with nothing to remember, and past ``capacity`` the one whose last failure is oldest.
    private static func bound(_ clients: inout [String: Client], keeping client: String) {
        if let record = clients[client], record.failures == 0, record.waiting == 0 {
            clients[client] = nil
            return
        }
        guard clients.count > capacity,
            let oldest = clients.lazy.filter({ $0.key != client && $0.value.waiting == 0 }).min(by: { $0.value.lastFailure < $1.value.lastFailure })
        else { return }
        clients[oldest.key] = nil
    }

    /// The client's failures remembered now.
    func failures(of client: String) -> Int {
        let now = clock.instant()
        return clients.withLockedValue { Self.current($0[client], at: now).failures }
    }

    /// The throttle's key for a client address: an IPv4 address as itself (also when it arrives IPv4-mapped,
    /// `::ffff:a.b.c.d`, as it does on a listener bound to `::`), an IPv6 address by its /64 (one host usually holds
    /// the whole /64).
    static func key(_ address: String) -> String {
        guard let bytes = TrustedProxies.bytes(of: TrustedProxies.address(address)) else { return address }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
