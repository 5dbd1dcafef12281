import NIOConcurrencyHelpers

/// Admissions go to the database in rounds: while one round is on its way, the admissions that arrive wait, and the
/// next round takes them all in one call and one commit (`rc_relay_admit_all`). A lone webhook goes at once; under load
/// the round trip, the statement and the durable commit are shared by up to ``maxBatch`` webhooks, and each webhook
/// is still answered only after the commit that holds its event.
final class AdmissionBatcher: Sendable {
    /// One event to admit, as the database function takes it.
    struct Request: Sendable {
        var project: String
        var version: Int64
        var fingerprint: String
        var record: String
        var keys: [String]
        /// The deduplication window, in seconds.
        var window: Double
        /// The notice for the project's lease holder; empty for none.
        var notice: String
    }

    /// The event already holding one of a request's keys.
    struct Holder: Sendable, Equatable {
        var fingerprint: String
        var settled: Bool
        var reports: String
    }

    /// Per request, in order: the holders of its keys that are not it (none when it was admitted).
    typealias Round = @Sendable ([Request]) async throws(StoreError) -> [[String: Holder]]

    static let maxBatch = 64
    /// Rounds on their way at once: a second round starts while the first waits for its commit, so a webhook that
    /// arrives just after a round left waits for one commit, not two (PostgreSQL commits them together).
    static let maxRounds = 2

    private struct Waiting {
        var request: Request
        var answer: CheckedContinuation<Result<[String: Holder], StoreError>, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var rounds = 0
    }

    private let state = NIOLockedValueBox(State())

    /// How many admissions wait for the next round.
    var waiting: Int { state.withLockedValue { $0.waiting.count } }

    /// Admits `request` in the next round; `round` runs a round (the same function for every caller).
    func admit(_ request: Request, round: @escaping Round) async throws(StoreError) -> [String: Holder] {
        let result = await withCheckedContinuation { answer in
            let start = state.withLockedValue { state in
                state.waiting.append(Waiting(request: request, answer: answer))
                guard state.rounds < Self.maxRounds else { return false }
                state.rounds += 1
                return true
            }
            // A task runs rounds while anybody waits, then ends: no task is left behind when nothing is admitted.
            if start { Task { await self.runRounds(round) } }
        }
        return try result.get()
    }

    private func runRounds(_ round: Round) async {
        while true {
            let batch = state.withLockedValue { state in
                let batch = Array(state.waiting.prefix(Self.maxBatch))
                state.waiting.removeFirst(batch.count)
                if batch.isEmpty { state.rounds -= 1 }
                return batch
            }
            guard !batch.isEmpty else { return }
            for (waiting, outcome) in zip(batch, await Self.outcomes(of: batch.map(\.request), round)) {
                waiting.answer.resume(returning: outcome)
            }
        }
    }

    /// Each request's outcome. A round the database refuses (one event it cannot take, or a deadlock with another
    /// replica's round) is run again one request at a time, so only the request at fault fails.
    private static func outcomes(of requests: [Request], _ round: Round) async -> [Result<[String: Holder], StoreError>] {
        do {
            let holders = try await round(requests)
            guard holders.count == requests.count else {
                return Array(
                    repeating: .failure(.failed("the admission answered \(holders.count) of \(requests.count) events")), count: requests.count)
            }
            return holders.map { .success($0) }
        } catch {
            guard case .failed = error, requests.count > 1 else { return Array(repeating: .failure(error), count: requests.count) }
            var outcomes: [Result<[String: Holder], StoreError>] = []
            for request in requests { outcomes += await Self.outcomes(of: [request], round) }
            return outcomes
        }
    }
}
