import DeliveryEngine
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import RelayServer
@testable import RelayStore

/// The fence itself (issue #49): ``LeaseClaims`` on a clock the test moves, against a store whose answers the test
/// chooses and can hold back. Each branch: a fresh claim, a lapsed one, an epoch the store no longer confirms, a
/// confirmation, a slow database's late yes, a database that does not answer, and a take-over during a send.
struct LeaseClaimsTests {
    /// The store's side of the fence: counts the questions, answers as told, and can hold an answer until released.
    final class Store: LeaseConfirmation {
        struct State {
            var asked: [(name: String, epoch: Int64)] = []
            var answer: Result<Duration?, StoreError> = .success(LeaseClaimsTests.lease)
            var hold = false
            var held: [CheckedContinuation<Void, Never>] = []
        }
        let state = NIOLockedValueBox(State())
        let asks: AsyncStream<Void>
        let ask: AsyncStream<Void>.Continuation

        init() { (asks, ask) = AsyncStream.makeStream() }

        func confirm(_ name: String, epoch: Int64) async throws(StoreError) -> Duration? {
            let hold = state.withLockedValue { state in
                state.asked.append((name, epoch))
                return state.hold
            }
            ask.yield()
            if hold {
                await withCheckedContinuation { continuation in state.withLockedValue { $0.held.append(continuation) } }
            }
            return try state.withLockedValue { $0.answer }.get()
        }

        func release() {
            for waiter in state.withLockedValue({ state in
                defer { state.held = [] }
                return state.held
            }) { waiter.resume() }
        }

        var asked: Int { state.withLockedValue { $0.asked.count } }
    }

    static let lease = Duration.seconds(6)
    let clock = ManualDeliveryClock()
    let store = Store()
    let claims: LeaseClaims

    init() { self.init(planted: []) }

    init(planted: PlantedBugs) {
        claims = LeaseClaims(
            confirmation: store, lease: Self.lease, clock: clock, metrics: RelayMetrics(), logger: Logger(label: "test"), planted: planted)
        // Taken now, under epoch 7: it counts for half the lease.
        let now = clock.instant()
        claims.state.withLockedValue { $0.held["p"] = LeaseClaims.Claim(until: now + Self.lease / 2, epoch: 7, confirmed: now) }
    }

    @Test func aFreshClaimIsNotAskedAgain() async {
        clock.advance(by: Self.lease / 3 - .milliseconds(1))
        #expect(await claims.refusal(project: "p") == nil)
        #expect(store.asked == 0)
        #expect(claims.holds("p") && claims.epoch("p") == 7)
    }

    @Test func aLapsedClaimIsRefusedWithoutAsking() async {
        clock.advance(by: Self.lease / 2)
        #expect(await claims.refusal(project: "p") == LeaseClaims.notHeld)
        #expect(await claims.refusal(project: "other") == LeaseClaims.notHeld)
        #expect(store.asked == 0)
        #expect(!claims.holds("p") && claims.epoch("p") == nil)
    }

    @Test func anEpochTheStoreNoLongerConfirmsIsRefusedAndTheClaimDropped() async {
        clock.advance(by: Self.lease / 3)
        store.state.withLockedValue { $0.answer = .success(nil) }
        #expect(await claims.refusal(project: "p") == LeaseClaims.notHeld, "the store's no is the answer, whatever the claim's own bound")
        #expect(store.state.withLockedValue { $0.asked.map(\.epoch) } == [7])
        #expect(store.state.withLockedValue { $0.asked.map(\.name) } == [LeaseClaims.leaseName("p")])
        #expect(!claims.holds("p"))
        // Dropped: the next request is refused without asking again.
        #expect(await claims.refusal(project: "p") == LeaseClaims.notHeld)
        #expect(store.asked == 1)
    }

    @Test func aConfirmationCountsForHalfALeaseFromWhenItWasAsked() async {
        clock.advance(by: Self.lease / 3)
        let asked = clock.instant()
        #expect(await claims.refusal(project: "p") == nil)
        #expect(store.asked == 1)
        let claim = claims.state.withLockedValue { $0.held["p"] }
        #expect(claim?.confirmed == asked && claim?.until == asked + Self.lease / 2)
        // Confirmed a moment ago: not asked again until a third of the lease has passed since.
        clock.advance(by: Self.lease / 4)
        #expect(await claims.refusal(project: "p") == nil)
        #expect(store.asked == 1)
    }

    @Test func aSlowDatabasesLateYesIsTooOldToSendOn() async {
        clock.advance(by: Self.lease / 3)
        store.state.withLockedValue { $0.hold = true }
        async let refusal = claims.refusal(project: "p")
        var asks = store.asks.makeAsyncIterator()
        _ = await asks.next()
        // The answer takes half a lease: by then another replica may have taken the lease over.
        clock.advance(by: Self.lease / 2)
        store.release()
        #expect(await refusal == LeaseClaims.notHeld)
    }

    @Test func aDatabaseThatDoesNotAnswerLeavesTheClaimsOwnBound() async {
        store.state.withLockedValue { $0.answer = .failure(.unavailable("no answer")) }
        clock.advance(by: Self.lease / 3)
        #expect(await claims.refusal(project: "p") == nil, "within half the lease of its renewal, the claim still counts")
        clock.advance(by: Self.lease / 2 - Self.lease / 3)
        #expect(await claims.refusal(project: "p") == LeaseClaims.notHeld)
        #expect(store.asked == 1, "lapsed: refused without asking")
    }

    @Test func aTakeOverDuringASendStopsWhatFollowsAndSparesTheNewClaim() async {
        // A request passed the fence under epoch 7 and is on its way. Meanwhile the renewal finds the lease taken
        // over and this replica takes it back under epoch 9.
        #expect(await claims.refusal(project: "p") == nil)
        let now = clock.instant()
        claims.state.withLockedValue { $0.held["p"] = LeaseClaims.Claim(until: now + Self.lease / 2, epoch: 9, confirmed: now) }
        // The send decided under epoch 7 is refused by the store (fenced): dropping epoch 7's claim spares epoch 9's.
        #expect(!claims.drop("p", epoch: 7))
        #expect(claims.epoch("p") == 9)
        // Epoch 9's own loss drops it, and the next request is refused.
        #expect(claims.drop("p", epoch: 9))
        #expect(await claims.refusal(project: "p") == LeaseClaims.notHeld)
    }

    // The planted bugs (docs/replicas.md, "Planted bugs") do what they say, and nothing else: the campaign's proof
    // that it catches each is only as good as the bug it plants.

    @Test func withTheLapseCheckPlantedALapsedClaimIsAskedAndADatabaseAwaySendsOnIt() async {
        let planted = LeaseClaimsTests(planted: .lapseCheck)
        planted.clock.advance(by: Self.lease)
        #expect(await planted.claims.refusal(project: "p") == nil, "lapsed, and the store said yes: sent")
        #expect(planted.store.asked == 1)
        planted.store.state.withLockedValue { $0.answer = .failure(.unavailable("no answer")) }
        planted.clock.advance(by: Self.lease)
        #expect(await planted.claims.refusal(project: "p") == nil, "lapsed, and the store did not answer: sent")
        planted.store.state.withLockedValue { $0.answer = .success(nil) }
        #expect(await planted.claims.refusal(project: "p") == LeaseClaims.notHeld, "the epoch check still refuses")
    }

    @Test func withTheEpochCheckPlantedTheStoreIsNeverAskedAndTheLapseStillRefuses() async {
        let planted = LeaseClaimsTests(planted: .epochCheck)
        planted.store.state.withLockedValue { $0.answer = .success(nil) }
        planted.clock.advance(by: Self.lease / 2 - .milliseconds(1))
        #expect(await planted.claims.refusal(project: "p") == nil, "taken over, but never asked: sent")
        #expect(planted.store.asked == 0)
        planted.clock.advance(by: .milliseconds(1))
        #expect(await planted.claims.refusal(project: "p") == LeaseClaims.notHeld)
    }

    @Test func aYesJustBeforeTheLeaseExpiresCountsForHalfOfWhatItHasLeft() async {
        // The renewals failed: the lease has 1 s left on the database's clock when the fence asks. Its yes must not
        // outlast the lease (another replica takes it over then): half of that second, not half a lease.
        clock.advance(by: Self.lease / 3)
        store.state.withLockedValue { $0.answer = .success(.seconds(1)) }
        #expect(await claims.refusal(project: "p") == nil)
        // The renewal's own bound (half a lease from its start) still holds; the yes did not stretch it to half a
        // lease from the question.
        clock.advance(by: Self.lease / 2 - Self.lease / 3)
        #expect(await claims.refusal(project: "p") == LeaseClaims.notHeld)
        #expect(store.asked == 1)
    }
}
