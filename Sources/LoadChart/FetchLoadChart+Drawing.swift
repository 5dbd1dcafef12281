import Foundation

/// The chart drawn once onto a ``ChartCanvas``: as SVG (each tick and line marked with its value, `data-value` and
/// `data-peak`, so a test can check the drawing against the model) and as a PNG.
extension FetchLoadChart {
    /// Where things go, in pixels.
    enum Layout {
        static let width = 1000.0
        static let height = 580.0
        /// The main plot.
        static let left = 90.0, right = 690.0, top = 90.0, bottom = 470.0
        /// The comparison panel.
        static let panelLeft = 800.0, panelRight = 975.0, panelTop = 110.0, panelBottom = 300.0
        static let colours = [ChartColour("#1a73e8"), ChartColour("#e8710a"), ChartColour("#80868b")]
        static let limitColour = ChartColour("#d93025")
    }

    public func svg() -> String {
        var canvas = SVGCanvas(width: Layout.width, height: Layout.height)
        draw(on: &canvas)
        return canvas.document
    }

    /// The same chart as a PNG file's bytes.
    public func png() -> [UInt8] {
        var canvas = RasterCanvas(width: Int(Layout.width), height: Int(Layout.height))
        draw(on: &canvas)
        return PNGEncoder.encode(width: canvas.width, height: canvas.height, rgb: canvas.pixels)
    }

    func draw<Canvas: ChartCanvas>(on canvas: inout Canvas) {
        typealias L = Layout
        let (scale, unit, times) = (scale, timeUnit, timeScale)
        func x(_ seconds: Double) -> Double { L.left + times.position(seconds / unit.seconds, length: L.right - L.left) }
        func y(_ rate: Double) -> Double { L.bottom - scale.position(rate, length: L.bottom - L.top) }
        let peak = model.peak
        canvas.text(title, at: ChartPoint(20, 32), style: ChartTextStyle(size: 17, bold: true), marks: ["class": "title"])
        canvas.text(
            "peak \(Self.number(peak.rate)) fetches/s at \(Self.number(peak.at)) s; all fetched by \(Self.number(model.end)) s",
            at: ChartPoint(20, 58), style: ChartTextStyle(colour: .muted), marks: .none)
        for tick in scale.ticks {
            canvas.line(ChartPoint(L.left, y(tick)), ChartPoint(L.right, y(tick)), colour: .grid, width: 1, dashed: false, marks: .none)
            canvas.text(
                Self.number(tick), at: ChartPoint(L.left - 8, y(tick) + 4), style: ChartTextStyle(anchor: .end),
                marks: ["class": "y-tick", "data-value": "\(tick)"])
        }
        for tick in times.ticks {
            let at = x(tick * unit.seconds)
            canvas.line(ChartPoint(at, L.top), ChartPoint(at, L.bottom), colour: .grid, width: 1, dashed: false, marks: .none)
            canvas.text(
                Self.number(tick), at: ChartPoint(at, L.bottom + 20), style: ChartTextStyle(anchor: .middle),
                marks: ["class": "x-tick", "data-value": "\(tick * unit.seconds)"])
        }
        canvas.text(
            "time after the publish (\(unit.name))", at: ChartPoint((L.left + L.right) / 2, L.bottom + 44),
            style: ChartTextStyle(anchor: .middle), marks: .none)
        canvas.text(
            "fetches per second", at: ChartPoint(28, (L.top + L.bottom) / 2), style: ChartTextStyle(anchor: .middle, vertical: true),
            marks: .none)
        drawLimit(on: &canvas, x: x, y: y, top: scale.top)
        canvas.rect(
            ChartRect(x: L.left, y: L.top, width: L.right - L.left, height: L.bottom - L.top), fill: nil, opacity: 1, stroke: .frame,
            marks: ["id": "plot"])
        canvas.polyline(
            model.outline.map { ChartPoint(x($0.t), y($0.rate)) }, colour: L.colours[0], width: 2.5,
            marks: ["class": "main", "data-series": "as set", "data-peak": "\(peak.rate)"])
        drawPanel(on: &canvas)
        var footer = L.bottom + 76
        for sentence in [limitSentence, Self.throttlingNote].compactMap({ $0 }) {
            canvas.text(sentence, at: ChartPoint(20, footer), style: ChartTextStyle(colour: .muted), marks: ["class": "note"])
            footer += 20
        }
    }

    /// The limit's line and the shaded time above it, or a note that it lies above the scale.
    private func drawLimit<Canvas: ChartCanvas>(
        on canvas: inout Canvas, x: (Double) -> Double, y: (Double) -> Double, top: Double
    ) {
        typealias L = Layout
        guard let limit, let over = overLimit else { return }
        guard limit <= top else {
            canvas.text(
                "limit \(Self.number(limit))/s: above this scale", at: ChartPoint(L.right - 6, L.top + 18),
                style: ChartTextStyle(colour: L.limitColour, anchor: .end), marks: ["class": "limit", "data-value": "\(limit)"])
            return
        }
        for span in over.spans {
            canvas.rect(
                ChartRect(x: x(span.from), y: L.top, width: x(span.to) - x(span.from), height: L.bottom - L.top),
                fill: L.limitColour, opacity: 0.12, stroke: nil,
                marks: ["class": "over-limit", "data-from": "\(span.from)", "data-to": "\(span.to)"])
        }
        canvas.line(
            ChartPoint(L.left, y(limit)), ChartPoint(L.right, y(limit)), colour: L.limitColour, width: 1.5, dashed: true,
            marks: ["class": "limit", "data-value": "\(limit)"])
        canvas.text(
            "limit \(Self.number(limit))/s", at: ChartPoint(L.right - 6, y(limit) - 6),
            style: ChartTextStyle(colour: L.limitColour, anchor: .end), marks: .none)
    }

    /// The three lines on a log scale, beside the main plot, with their peaks as the legend.
    private func drawPanel<Canvas: ChartCanvas>(on canvas: inout Canvas) {
        typealias L = Layout
        let series = Self.compared(model)
        let scale = LogScale(peaks: series.map(\.model.peak.rate) + (limit.map { [$0] } ?? []))
        let end = series.map(\.model.end).max() ?? 1
        func x(_ t: Double) -> Double { L.panelLeft + t / end * (L.panelRight - L.panelLeft) }
        func y(_ rate: Double) -> Double { L.panelBottom - scale.position(rate, length: L.panelBottom - L.panelTop) }
        canvas.text(
            "Compared, log scale (0 to \(Self.number(end)) s)", at: ChartPoint(L.panelLeft - 50, L.panelTop - 16),
            style: ChartTextStyle(bold: false), marks: .none)
        for tick in scale.ticks {
            canvas.line(ChartPoint(L.panelLeft, y(tick)), ChartPoint(L.panelRight, y(tick)), colour: .grid, width: 1, dashed: false, marks: .none)
            canvas.text(
                Self.number(tick), at: ChartPoint(L.panelLeft - 6, y(tick) + 4), style: ChartTextStyle(size: 11, anchor: .end),
                marks: ["class": "log-tick", "data-value": "\(tick)"])
        }
        if let limit {
            canvas.line(
                ChartPoint(L.panelLeft, y(limit)), ChartPoint(L.panelRight, y(limit)), colour: L.limitColour, width: 1, dashed: true,
                marks: .none)
        }
        canvas.rect(
            ChartRect(x: L.panelLeft, y: L.panelTop, width: L.panelRight - L.panelLeft, height: L.panelBottom - L.panelTop),
            fill: nil, opacity: 1, stroke: .frame, marks: .none)
        for (index, (name, line)) in series.enumerated() {
            let colour = L.colours[index % L.colours.count]
            canvas.polyline(
                line.outline.map { ChartPoint(x($0.t), y($0.rate)) }, colour: colour, width: 1.5,
                marks: ["class": "compared", "data-series": name, "data-peak": "\(line.peak.rate)"])
            let row = L.panelBottom + 34 + 22 * Double(index)
            canvas.rect(ChartRect(x: L.panelLeft - 50, y: row - 6, width: 16, height: 4), fill: colour, opacity: 1, stroke: nil, marks: .none)
            canvas.text(
                "\(name): peak \(Self.number(line.peak.rate))/s", at: ChartPoint(L.panelLeft - 28, row), style: ChartTextStyle(), marks: .none)
        }
    }
}
