import FCMClient
import NIOConcurrencyHelpers
import Testing

@testable import RelayStore

/// Admissions in rounds, with a round function that stands in for the database and holds its first rounds (as many as
/// may be on their way at once) until told.
struct AdmissionBatcherTests {
    func request(_ project: String) -> AdmissionBatcher.Request {
        AdmissionBatcher.Request(
            project: project, version: 1, fingerprint: "\(project)/1", record: "{}", keys: ["\(project)/version/1"], window: 600, notice: "")
    }

    /// A round function that records each round's projects, answers each request with a holder named after it (so a
    /// caller given another's answer shows), refuses rounds as `refuse` says, and holds its first
    /// ``AdmissionBatcher/maxRounds`` rounds until `release` is called.
    final class Rounds: Sendable {
        let rounds = NIOLockedValueBox<[[String]]>([])
        let refuse: @Sendable ([AdmissionBatcher.Request]) -> StoreError?
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        /// Released, or the rounds waiting for the release.
        let gate = NIOLockedValueBox<(released: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

        init(refuse: @escaping @Sendable ([AdmissionBatcher.Request]) -> StoreError? = { _ in nil }) { self.refuse = refuse }

        func release() {
            for waiting in gate.withLockedValue({ gate in
                gate.released = true
                defer { gate.waiting = [] }
                return gate.waiting
            }) { waiting.resume() }
        }

        func run(_ batch: [AdmissionBatcher.Request]) async throws(StoreError) -> [[String: AdmissionBatcher.Holder]] {
            let held = rounds.withLockedValue { rounds in
                rounds.append(batch.map(\.project))
                return rounds.count <= AdmissionBatcher.maxRounds
            }
            if held {
                await withCheckedContinuation { continuation in
                    let released = gate.withLockedValue { gate in
                        if !gate.released { gate.waiting.append(continuation) }
                        return gate.released
                    }
                    if released { continuation.resume() }
                    startedContinuation.yield()
                }
            }
            if let error = refuse(batch) { throw error }
            return batch.map { [$0.project: AdmissionBatcher.Holder(fingerprint: $0.fingerprint, settled: false, reports: "[]")] }
        }
    }

    /// The projects whose admissions fill the rounds that may be on their way at once.
    static let first = (0..<AdmissionBatcher.maxRounds).map { "first\($0)" }

    /// Admits ``first`` one by one, each in a round of its own, held; then, while those rounds are on their way,
    /// `projects` in order; then lets the held rounds end. Returns each one's outcome by project.
    func admit(then projects: [String], batcher: AdmissionBatcher, rounds: Rounds) async -> [String: Result<
        [String: AdmissionBatcher.Holder], StoreError
    >] {
        await withTaskGroup(of: (String, Result<[String: AdmissionBatcher.Holder], StoreError>).self) { group in
            var started = rounds.started.makeAsyncIterator()
            for project in Self.first + projects {
                if let index = projects.firstIndex(of: project) {
                    // Every later admission arrives while the first rounds are on their way.
                    while batcher.waiting < index { await Task.yield() }
                }
                group.addTask {
                    do throws(StoreError) {
                        return (
                            project, .success(try await batcher.admit(request(project)) { batch throws(StoreError) in try await rounds.run(batch) })
                        )
                    } catch {
                        return (project, .failure(error))
                    }
                }
                if Self.first.contains(project) { _ = await started.next() }
            }
            while batcher.waiting < projects.count { await Task.yield() }
            rounds.release()
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
    }

    @Test func admissionsArrivingDuringARoundGoTogetherInTheNext() async throws {
        let (batcher, rounds) = (AdmissionBatcher(), Rounds())
        let projects = (1...10).map { "p\($0)" }
        let outcomes = await admit(then: projects, batcher: batcher, rounds: rounds)
        #expect(rounds.rounds.withLockedValue { $0 } == Self.first.map { [$0] } + [projects])
        for project in Self.first + projects {
            // Each caller has its own answer, not its neighbour's.
            #expect(try outcomes[project]?.get() == [project: AdmissionBatcher.Holder(fingerprint: "\(project)/1", settled: false, reports: "[]")])
        }
        #expect(batcher.waiting == 0)
    }

    @Test func aRoundTheDatabaseRefusesIsRunAgainOneByOneAndOnlyTheFaultyEventFails() async throws {
        let rounds = Rounds { batch in batch.contains { $0.project == "bad" } ? .failed("22P02 invalid input") : nil }
        let outcomes = await admit(then: ["p1", "bad", "p2"], batcher: AdmissionBatcher(), rounds: rounds)
        #expect(rounds.rounds.withLockedValue { $0 } == Self.first.map { [$0] } + [["p1", "bad", "p2"], ["p1"], ["bad"], ["p2"]])
        for project in Self.first + ["p1", "p2"] { #expect(throws: Never.self) { try outcomes[project]?.get() } }
        #expect {
            try outcomes["bad"]?.get()
        } throws: { error in
            guard case StoreError.failed = error else { return false }
            return true
        }
    }

    @Test func anUnreachableDatabaseFailsTheWholeRoundAtOnce() async throws {
        let rounds = Rounds { batch in batch.count > 1 ? .unavailable("connection reset") : nil }
        let outcomes = await admit(then: ["p1", "p2"], batcher: AdmissionBatcher(), rounds: rounds)
        // Not one by one: each would wait for the same timeout in turn, and each caller answers 503 anyway.
        #expect(rounds.rounds.withLockedValue { $0 } == Self.first.map { [$0] } + [["p1", "p2"]])
        for project in ["p1", "p2"] {
            #expect {
                try outcomes[project]?.get()
            } throws: { error in
                guard case StoreError.unavailable = error else { return false }
                return true
            }
        }
    }

    @Test func aRoundTakesAtMostItsLimitAndTheRestFollow() async throws {
        let (batcher, rounds) = (AdmissionBatcher(), Rounds())
        let projects = (1...(AdmissionBatcher.maxBatch + 5)).map { "p\($0)" }
        let outcomes = await admit(then: projects, batcher: batcher, rounds: rounds)
        // The two runners may record their rounds in either order.
        #expect(rounds.rounds.withLockedValue { $0.map(\.count) }.sorted() == Self.first.map { _ in 1 } + [5, AdmissionBatcher.maxBatch])
        #expect(outcomes.count == projects.count + Self.first.count)
        #expect(outcomes.values.allSatisfy { (try? $0.get()) != nil })
    }
}
