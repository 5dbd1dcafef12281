import Foundation
import Testing

@testable import LoadChart

/// The chart's scales and the time above a limit, against the model sampled finely.
@Suite struct FetchLoadChartTests {
    @Test func aScaleHasRoundTicksAndTheDataFillsMostOfIt() {
        var maxima: [Double] = [0.3, 1, 1.01, 2.5, 9.99, 33_333.3, 200_000, 4e9]
        var generator = SystemRandomNumberGenerator()
        maxima += (0..<500).map { _ in pow(10, Double.random(in: -2...9, using: &generator)) }
        for maximum in maxima {
            let scale = ChartScale(covering: maximum)
            let magnitude = pow(10, log10(scale.step).rounded(.down))
            let mantissa = scale.step / magnitude
            #expect([1, 2, 2.5, 5].contains { abs($0 - mantissa) < 1e-9 }, "\(maximum): step \(scale.step)")
            #expect(scale.top >= maximum * (1 - 1e-12) && maximum / scale.top >= 0.6, "\(maximum): top \(scale.top)")
            #expect((3...8).contains(scale.ticks.count), "\(maximum): \(scale.ticks)")
            #expect(scale.ticks.first == 0 && abs(scale.ticks.last! - scale.top) < 1e-9 * scale.top)
        }
    }

    @Test func theTimeAboveALimitIsWhatSamplingFinds() {
        let models = [
            FetchLoadModel(devices: 2_000_000, shards: 20, spread: 600, clientDelay: 120, delivery: 10),
            FetchLoadModel(devices: 123_457, shards: 7, spread: 95, clientDelay: 17, delivery: 23),
            FetchLoadModel(devices: 1_000_000, shards: 4, spread: 400, delivery: 10),  // rectangles: the rate jumps
        ]
        for model in models {
            for share in [0.2, 0.5, 0.9, 1.2] {
                let limit = model.peak.rate * share
                let spans = model.spans(above: limit)
                let total = spans.reduce(0) { $0 + $1.to - $1.from }
                let step = model.end / 200_000
                let sampled = (0..<200_000).reduce(0.0) { $0 + (model.rate(at: (Double($1) + 0.5) * step) > limit ? step : 0) }
                #expect(abs(total - sampled) <= model.end * 1e-4, "limit \(limit): \(total) against \(sampled)")
                #expect(zip(spans, spans.dropFirst()).allSatisfy { $0.to < $1.from }, "disjoint and in order")
            }
        }
    }

    @Test func theOutlineReachesThePeakAndEndsAtZero() {
        let model = FetchLoadModel(devices: 1_000_000, shards: 4, spread: 400, delivery: 10)
        let outline = model.outline
        #expect(outline.first?.rate == 0 && outline.last?.rate == 0)
        #expect(abs((outline.map(\.rate).max() ?? 0) - model.peak.rate) < 1e-6)
        #expect(zip(outline, outline.dropFirst()).allSatisfy { $0.t <= $1.t })
    }

    @Test func aLimitFarAboveThePeakDoesNotSetTheScale() {
        let model = FetchLoadModel(devices: 1_000_000, clientDelay: 30, delivery: 10)
        #expect(FetchLoadChart(model: model, limit: 1_000_000).scale == ChartScale(covering: model.peak.rate))
        #expect(FetchLoadChart(model: model, limit: 40_000).scale.top >= 40_000 * 1.05)
        #expect(FetchLoadChart(model: model, limit: 1_000_000).limitSentence?.hasPrefix("Never above") == true)
    }

    @Test func aPNGIsWellFormed() {
        let png = FetchLoadChart(model: FetchLoadModel(devices: 1_000)).png()
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(Array(png.suffix(12)) == [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])  // IEND and its CRC
        #expect(PNGEncoder.crc32(Array("IEND".utf8)) == 0xAE42_6082)
    }
}
