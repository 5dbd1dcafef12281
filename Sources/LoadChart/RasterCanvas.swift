import Foundation

/// A chart as RGB pixels, for a PNG: shapes filled or stroked with square pens, text from ``ChartFont``'s glyphs.
/// Plain and exact enough for a chart; not a general renderer (no curves, no anti-aliased lines).
struct RasterCanvas: ChartCanvas {
    let width: Int
    let height: Int
    private(set) var pixels: [UInt8]

    init(width: Int, height: Int) {
        (self.width, self.height) = (width, height)
        pixels = [UInt8](repeating: 255, count: width * height * 3)
    }

    /// Mixes `colour` into the pixel at (x, y) with weight `alpha` (0 to 1); outside the picture it does nothing.
    mutating func blend(_ x: Int, _ y: Int, _ colour: ChartColour, alpha: Double) {
        guard x >= 0, y >= 0, x < width, y < height, alpha > 0 else { return }
        let index = (y * width + x) * 3
        let (r, g, b) = colour.rgb
        let a = min(alpha, 1)
        for (offset, channel) in [r, g, b].enumerated() {
            let old = Double(pixels[index + offset])
            pixels[index + offset] = UInt8((old + (Double(channel) - old) * a).rounded())
        }
    }

    mutating func rect(_ frame: ChartRect, fill: ChartColour?, opacity: Double, stroke: ChartColour?, marks: ChartMarks) {
        let (x0, y0) = (Int(frame.x.rounded()), Int(frame.y.rounded()))
        let (x1, y1) = (Int((frame.x + frame.width).rounded()), Int((frame.y + frame.height).rounded()))
        if let fill {
            for y in y0..<max(y0, y1) { for x in x0..<max(x0, x1) { blend(x, y, fill, alpha: opacity) } }
        }
        if let stroke {
            let corners = [
                ChartPoint(frame.x, frame.y), ChartPoint(frame.x + frame.width, frame.y),
                ChartPoint(frame.x + frame.width, frame.y + frame.height), ChartPoint(frame.x, frame.y + frame.height),
            ]
            polyline(corners + [corners[0]], colour: stroke, width: 1, marks: .none)
        }
    }

    mutating func line(_ from: ChartPoint, _ to: ChartPoint, colour: ChartColour, width: Double, dashed: Bool, marks: ChartMarks) {
        let length = hypot(to.x - from.x, to.y - from.y)
        let steps = max(Int(length * 2), 1)
        for step in 0...steps {
            let along = Double(step) / Double(steps) * length
            // Dashes of 6 pixels, gaps of 4, as the SVG's stroke-dasharray.
            if dashed, along.truncatingRemainder(dividingBy: 10) >= 6 { continue }
            let t = Double(step) / Double(steps)
            pen(from.x + (to.x - from.x) * t, from.y + (to.y - from.y) * t, colour: colour, width: width)
        }
    }

    mutating func polyline(_ points: [ChartPoint], colour: ChartColour, width: Double, marks: ChartMarks) {
        for (a, b) in zip(points, points.dropFirst()) { line(a, b, colour: colour, width: width, dashed: false, marks: .none) }
    }

    /// A square pen `width` wide centred on (x, y); its edges partly cover pixels, which softens them.
    private mutating func pen(_ x: Double, _ y: Double, colour: ChartColour, width: Double) {
        let half = max(width, 1) / 2
        for py in Int((y - half).rounded(.down))...Int((y + half).rounded(.down)) {
            for px in Int((x - half).rounded(.down))...Int((x + half).rounded(.down)) {
                let coverX = min(Double(px + 1), x + half) - max(Double(px), x - half)
                let coverY = min(Double(py + 1), y + half) - max(Double(py), y - half)
                if coverX > 0, coverY > 0 { blend(px, py, colour, alpha: min(coverX * coverY * 1.6, 1)) }
            }
        }
    }

    mutating func text(_ text: String, at point: ChartPoint, style: ChartTextStyle, marks: ChartMarks) {
        let font = style.bold ? ChartFont.bold : ChartFont.regular
        let width = Double(font.width(of: text))
        let shift: Double =
            switch style.anchor {
            case .start: 0
            case .middle: width / 2
            case .end: width
            }
        // Along the text's own direction from the anchor; the baseline at `point`.
        var pen = -shift
        for scalar in text.unicodeScalars {
            let glyph = font.glyph(scalar)
            let coverage = font.pixels(of: glyph)
            for row in 0..<font.height {
                for column in 0..<glyph.width where coverage[row * glyph.width + column] > 0 {
                    let along = pen + Double(glyph.left + column)
                    let across = Double(row - font.ascent)
                    let (x, y) = style.vertical ? (point.x + across, point.y - along) : (point.x + along, point.y + across)
                    blend(Int(x.rounded()), Int(y.rounded()), style.colour, alpha: Double(coverage[row * glyph.width + column]) / 15)
                }
            }
            pen += Double(glyph.advance)
        }
    }
}
