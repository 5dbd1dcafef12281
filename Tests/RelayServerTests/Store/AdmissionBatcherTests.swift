import FCMClient
import NIOConcurrencyHelpers
import Testing

@testable import RelayStore

/// Admissions in rounds, with a round function that stands in for the database and holds its first rounds (as many as
/// may be on their way at once) until told.
struct AdmissionBatcherTests {
    func request(_ project: String, id: String = "", notice: String = "") -> AdmissionBatcher.Request {
        AdmissionBatcher.Request(
            project: project, version: 1, versionKey: "\(project)/version/1", idKey: id, webhookKey: "", keys: "[]", record: "{}", window: 600,
            notice: notice)
    }

    static func holder(_ project: String) -> AdmissionBatcher.Outcome {
        .held([project: AdmissionBatcher.Holder(id: 1, fingerprint: "\(project)/1", settled: false, reports: "[]")])
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

        func run(_ batch: [AdmissionBatcher.Request]) async throws(StoreError) -> [AdmissionBatcher.Outcome] {
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
            return batch.map { AdmissionBatcherTests.holder($0.project) }
        }
    }

    /// The projects whose admissions fill the rounds that may be on their way at once.
    static let first = (0..<AdmissionBatcher.maxRounds).map { "first\($0)" }

    /// Admits ``first`` one by one, each in a round of its own, held; then, while those rounds are on their way,
    /// `projects` in order; then lets the held rounds end. Returns each one's outcome by project.
    func admit(then projects: [String], batcher: AdmissionBatcher, rounds: Rounds) async -> [String: Result<AdmissionBatcher.Outcome, StoreError>] {
        await withTaskGroup(of: (String, Result<AdmissionBatcher.Outcome, StoreError>).self) { group in
            var started = rounds.started.makeAsyncIterator()
            for project in Self.first + projects {
                if let index = projects.firstIndex(of: project) {
                    // Every later admission arrives while the first rounds are on their way.
                    while batcher.waiting < index { await Task.yield() }
                }
                group.addTask {
                    do throws(StoreError) {
                        return (
                            project,
                            .success(
                                try await batcher.admit(
                                    request(project), round: { batch throws(StoreError) in try await rounds.run(batch) }, notify: { _ in }))
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
            #expect(try outcomes[project]?.get() == Self.holder(project))
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

    /// Two admissions that share a key never go in one round (one statement cannot tell the second its holder, the
    /// first): the second waits for the next round, and the admissions after it do not.
    @Test func admissionsSharingAKeyGoInSeparateRounds() async throws {
        let requests = ["a", "b", "c", "d"].map { project in request(project, id: project == "a" || project == "c" ? "same-id" : "") }
        #expect(AdmissionBatcher.nextRound(requests) == [0, 1, 3])
    }

    /// Notices go after the round's answers, once per project, for the admitted events that carry one.
    @Test func noticesFollowTheAnswersForAdmittedEventsOnly() async throws {
        let batcher = AdmissionBatcher()
        let notices = NIOLockedValueBox<[[String]]>([])
        let (noticed, tell) = AsyncStream.makeStream(of: Void.self)
        let outcomes = try await withThrowingTaskGroup(of: AdmissionBatcher.Outcome.self) { group in
            for (index, project) in ["p1", "p2", "p3"].enumerated() {
                group.addTask {
                    try await batcher.admit(
                        request(project, notice: project == "p3" ? "" : "p\n"),
                        round: { batch throws(StoreError) in batch.map { $0.project == "p2" ? Self.holder("p2") : .admitted(Int64(index)) } },
                        notify: { sent in
                            notices.withLockedValue { $0.append(sent) }
                            tell.yield()
                        })
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.count == 3)
        var iterator = noticed.makeAsyncIterator()
        await iterator.next()
        // p2 was held and p3 carried none: p1's notice alone (in whichever round p1 went).
        #expect(notices.withLockedValue { $0 } == [["p\n"]])
    }
}
