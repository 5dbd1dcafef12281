import NIOConcurrencyHelpers

/// Admissions go to the database in rounds: while one round is on its way, the admissions that arrive wait, and the
/// next round takes them all in one statement and one commit. A lone webhook goes at once; under load
/// the round trip, the statement and the durable commit are shared by up to ``maxBatch`` webhooks, and each webhook
/// is still answered only after the commit that holds its event.
final class AdmissionBatcher: Sendable {
    /// One event to admit, as the admission statement takes it.
    struct Request: Sendable {
        var project: String
        var version: Int64
        /// The project and version's key, the event id's and the `webhook-id`'s (empty: the event has none).
        var versionKey: String
        var idKey: String
        var webhookKey: String
        /// The keys as the row keeps them for whoever reads the table (a JSON array).
        var keys: String
        var record: String
        /// The deduplication window, in seconds.
        var window: Double
        /// The notice for the project's lease holder; empty for none.
        var notice: String

        var allKeys: [String] { [versionKey, idKey, webhookKey].filter { !$0.isEmpty } }
    }

    /// The event already holding one of a request's keys.
    struct Holder: Sendable, Equatable {
        var id: Int64
        var fingerprint: String
        var settled: Bool
        var reports: String
    }

    /// What a round did with a request.
    enum Outcome: Sendable, Equatable {
        /// Admitted: its row.
        case admitted(Int64)
        /// Its keys' holders, by key.
        case held([String: Holder])
    }

    /// Per request, in order: its outcome.
    typealias Round = @Sendable ([Request]) async throws(StoreError) -> [Outcome]

    static let maxBatch = 64
    /// Rounds on their way at once: a second round starts while the first waits for its commit, so a webhook that
    /// arrives just after a round left waits for one commit, not two (PostgreSQL commits them together).
    static let maxRounds = 2

    private struct Waiting {
        var request: Request
        var answer: CheckedContinuation<Result<Outcome, StoreError>, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var rounds = 0
    }

    private let state = NIOLockedValueBox(State())

    /// How many admissions wait for the next round.
    var waiting: Int { state.withLockedValue { $0.waiting.count } }

    /// Tells the lease holders of a round's admitted events, after its commit (`NOTIFY` inside the admission would
    /// queue every replica's commits on one cluster-wide lock).
    typealias Notify = @Sendable ([String]) async -> Void

    /// Admits `request` in the next round; `round` runs a round and `notify` sends its notices once the waiters have
    /// their answers (the same functions for every caller).
    func admit(_ request: Request, round: @escaping Round, notify: @escaping Notify) async throws(StoreError) -> Outcome {
        let result = await withCheckedContinuation { answer in
            let start = state.withLockedValue { state in
                state.waiting.append(Waiting(request: request, answer: answer))
                guard state.rounds < Self.maxRounds else { return false }
                state.rounds += 1
                return true
            }
            // A task runs rounds while anybody waits, then ends: no task is left behind when nothing is admitted.
            if start { Task { await self.runRounds(round, notify) } }
        }
        return try result.get()
    }

    private func runRounds(_ round: Round, _ notify: Notify) async {
        while true {
            let batch = state.withLockedValue { state in
                let batch = Self.take(&state.waiting)
                if batch.isEmpty { state.rounds -= 1 }
                return batch
            }
            guard !batch.isEmpty else { return }
            var notices: [String] = []
            for (waiting, outcome) in zip(batch, await Self.outcomes(of: batch.map(\.request), round)) {
                if case .success(.admitted) = outcome, !waiting.request.notice.isEmpty, !notices.contains(waiting.request.notice) {
                    notices.append(waiting.request.notice)
                }
                waiting.answer.resume(returning: outcome)
            }
            if !notices.isEmpty { await notify(notices) }
        }
    }

    /// The next round: up to ``maxBatch`` requests in arrival order, no two of which share a key (a later one waits
    /// for the next round, where it finds the first one's row).
    private static func take(_ waiting: inout [Waiting]) -> [Waiting] {
        let chosen = Set(nextRound(waiting.map(\.request)))
        let batch = waiting.indices.filter(chosen.contains).map { waiting[$0] }
        waiting = waiting.indices.filter { !chosen.contains($0) }.map { waiting[$0] }
        return batch
    }

    /// Which of `requests` (their indices) the next round takes.
    static func nextRound(_ requests: [Request]) -> [Int] {
        var chosen: [Int] = []
        var keys: Set<String> = []
        for (index, request) in requests.enumerated() where chosen.count < maxBatch && keys.isDisjoint(with: request.allKeys) {
            chosen.append(index)
            keys.formUnion(request.allKeys)
        }
        return chosen
    }

    /// Each request's outcome. A round the database refuses (one event it cannot take) is run again one request at a
    /// time, so only the request at fault fails.
    private static func outcomes(of requests: [Request], _ round: Round) async -> [Result<Outcome, StoreError>] {
        do {
            let outcomes = try await round(requests)
            guard outcomes.count == requests.count else {
                return Array(
                    repeating: .failure(.failed("the admission answered \(outcomes.count) of \(requests.count) events")), count: requests.count)
            }
            return outcomes.map { .success($0) }
        } catch {
            guard case .failed = error, requests.count > 1 else { return Array(repeating: .failure(error), count: requests.count) }
            var outcomes: [Result<Outcome, StoreError>] = []
            for request in requests { outcomes += await Self.outcomes(of: [request], round) }
            return outcomes
        }
    }
}
