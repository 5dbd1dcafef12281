import Testing

@testable import LoadChart

/// `rc-relay simulate`'s model against closed forms worked out by hand.
@Suite struct FetchLoadModelTests {
    @Test func allAtOnceIsTheDevicesOverTheDeliveryWindow() {
        let model = FetchLoadModel(devices: 2_000_000, delivery: 10)
        #expect(abs(model.peak.rate - 200_000) < 1e-6)
        #expect(model.peak.at == 0)
        #expect(model.end == 10)
        #expect(model.rate(at: 10.5) == 0)
    }

    @Test func aClientDelayLongerThanDeliveryFlattensThePeakToItsLength() {
        let model = FetchLoadModel(devices: 2_000_000, clientDelay: 120, delivery: 10)
        #expect(abs(model.peak.rate - 2_000_000 / 120.0) < 1e-6)
        #expect(model.peak.at == 10)  // the plateau starts when the last device has its ping
        #expect(abs(model.rate(at: 5) - 2_000_000 / 120.0 / 2) < 1e-6)  // half way up the ramp
    }

    @Test func wavesWhoseDelayIsAWholeNumberOfSpacingsGiveAFlatRateOfDevicesOverTheSpread() {
        // 20 shards over 600 s: one every 30 s; a 120 s delay is 4 spacings, so the windows tile: N / 600 per second.
        let model = FetchLoadModel(devices: 2_000_000, shards: 20, spread: 600, clientDelay: 120, delivery: 10)
        #expect(abs(model.peak.rate - 2_000_000 / 600.0) < 1e-6)
        #expect(model.end == 570 + 130)
    }

    @Test func wavesThatDoNotOverlapPeakAtOneShardsShare() {
        let model = FetchLoadModel(devices: 1_000_000, shards: 4, spread: 400, delivery: 10)
        #expect(abs(model.peak.rate - 25_000) < 1e-6)
        #expect(model.sendTime(ofShard: 3) == 300)
        #expect(model.rate(at: 50) == 0)  // between two waves
    }

    @Test func everyDeviceFetchesExactlyOnce() {
        for model in [
            FetchLoadModel(devices: 1_000, shards: 7, spread: 100, clientDelay: 33, delivery: 5),
            FetchLoadModel(devices: 1_000, shards: 1, clientDelay: 3, delivery: 50),
        ] {
            let fetched = (0..<model.shards).reduce(0.0) { total, k in
                total + model.devices / Double(model.shards) * model.cumulative(model.end - model.sendTime(ofShard: k))
            }
            #expect(abs(fetched - 1_000) < 1e-9)
            // The density is the cumulative's slope.
            let (x, h) = (4.0, 1e-6)
            #expect(abs((model.cumulative(x + h) - model.cumulative(x - h)) / (2 * h) - model.density(x)) < 1e-6)
        }
    }

    @Test func settingsOutsideTheModelAreRefused() {
        #expect(FetchLoadModel(devices: 0).problem?.contains("devices") == true)
        #expect(FetchLoadModel(devices: 10, shards: 0).problem?.contains("shards") == true)
        #expect(FetchLoadModel(devices: 10, spread: -1).problem?.contains("spread") == true)
        #expect(FetchLoadModel(devices: 10, clientDelay: .nan).problem?.contains("client delay") == true)
        #expect(FetchLoadModel(devices: 10, delivery: 0).problem?.contains("delivery") == true)
        #expect(FetchLoadModel(devices: 10).problem == nil)
    }
}
