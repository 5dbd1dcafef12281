import Testing

@testable import DeliveryEngine

/// The project pace on a manual clock: slots, bursts, a 429's cut and the climb back.
@Suite struct PacerTests {
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    @Test func aBurstGoesAtOnceAndTheRestTakeTheirSlots() {
        let clock = ManualDeliveryClock()
        let pacer = Pacer(rate: 10, clock: clock)
        let waits = (0..<13).map { _ in Self.seconds(pacer.reserve()) }
        #expect(waits.prefix(10).allSatisfy { $0 == 0 })
        #expect(zip(waits.suffix(3), [0.1, 0.2, 0.3]).allSatisfy { abs($0 - $1) < 1e-6 }, "\(waits)")
    }

    @Test func aQuietSpellRefillsTheBurstButSavesNoMore() {
        let clock = ManualDeliveryClock()
        let pacer = Pacer(rate: 10, clock: clock)
        for _ in 0..<10 { _ = pacer.reserve() }
        clock.advance(by: .seconds(60))
        let waits = (0..<11).map { _ in Self.seconds(pacer.reserve()) }
        #expect(waits.prefix(10).allSatisfy { $0 == 0 })
        #expect(abs(waits[10] - 0.1) < 1e-6)  // sixty quiet seconds do not make 600 free slots
    }

    @Test func a429HalvesThePaceAndItClimbsBackOverTheRecovery() {
        let clock = ManualDeliveryClock()
        let pacer = Pacer(rate: 10, recovery: .seconds(60), clock: clock)
        pacer.throttled()
        #expect(pacer.current == 5)
        clock.advance(by: .seconds(30))
        #expect(abs(pacer.current - 7.5) < 1e-9)
        // A second 429 halves what the pace is then, not the configured rate.
        pacer.throttled()
        #expect(abs(pacer.current - 3.75) < 1e-9)
        clock.advance(by: .seconds(60))
        #expect(pacer.current == 10)
        // Slots follow the pace: at 5 a second after a cut, 0.2 s apart once the burst is spent.
        pacer.throttled()
        for _ in 0..<30 { _ = pacer.reserve() }
        let gap = Self.seconds(pacer.reserve()) - Self.seconds(pacer.reserve())
        #expect(abs(abs(gap) - 0.2) < 1e-6, "\(gap)")
    }

    @Test func aRunOf429sNeverStopsTheProject() {
        let clock = ManualDeliveryClock()
        let pacer = Pacer(rate: 1_000, clock: clock)
        for _ in 0..<100 { pacer.throttled() }
        #expect(pacer.current == Pacer.floor)
        #expect(Self.seconds(pacer.reserve()) == 0)
        #expect(abs(Self.seconds(pacer.reserve()) - 1) < 1e-6)
    }

    @Test func eachProjectHasItsOwnPaceKeptAcrossLookups() {
        let pacers = Pacers(rate: 2, clock: ManualDeliveryClock())
        pacers.pacer(for: "a").throttled()
        #expect(pacers.pacer(for: "a").current == 1)
        #expect(pacers.pacer(for: "b").current == 2)
        #expect(pacers.pacer(for: "a") === pacers.pacer(for: "a"))
    }
}
