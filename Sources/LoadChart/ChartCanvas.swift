import Foundation

/// What a chart is drawn on: SVG text (``SVGCanvas``) or pixels for a PNG (``RasterCanvas``). The chart draws once,
/// with these few shapes, so both pictures show the same thing.
protocol ChartCanvas {
    mutating func rect(_ frame: ChartRect, fill: ChartColour?, opacity: Double, stroke: ChartColour?, marks: ChartMarks)
    mutating func line(_ from: ChartPoint, _ to: ChartPoint, colour: ChartColour, width: Double, dashed: Bool, marks: ChartMarks)
    mutating func polyline(_ points: [ChartPoint], colour: ChartColour, width: Double, marks: ChartMarks)
    mutating func text(_ text: String, at: ChartPoint, style: ChartTextStyle, marks: ChartMarks)
}

struct ChartPoint: Sendable {
    var x: Double
    var y: Double
    init(_ x: Double, _ y: Double) { (self.x, self.y) = (x, y) }
}

struct ChartRect: Sendable {
    var x: Double, y: Double, width: Double, height: Double
}

/// A colour as `#rrggbb`.
struct ChartColour: Sendable, Equatable {
    let hex: String
    init(_ hex: String) { self.hex = hex }

    var rgb: (r: UInt8, g: UInt8, b: UInt8) {
        let value = UInt32(hex.dropFirst(), radix: 16) ?? 0
        return (UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF))
    }

    static let black = ChartColour("#000000")
    static let ink = ChartColour("#202124")
    static let muted = ChartColour("#3c4043")
    static let frame = ChartColour("#5f6368")
    static let grid = ChartColour("#e0e0e0")
    static let white = ChartColour("#ffffff")
}

struct ChartTextStyle: Sendable {
    enum Anchor: String, Sendable { case start, middle, end }
    var size: Double = 13
    var bold = false
    var colour = ChartColour.ink
    var anchor = Anchor.start
    /// Turned a quarter left, reading upwards (an axis title).
    var vertical = false
}

/// What the SVG carries beside the drawing, for tests and tools: a class and `data-*` attributes. A raster ignores them.
struct ChartMarks: Sendable, ExpressibleByDictionaryLiteral {
    var attributes: [(String, String)]
    init(dictionaryLiteral elements: (String, String)...) { attributes = elements }
    static let none: ChartMarks = [:]
}
