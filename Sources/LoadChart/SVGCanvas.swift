import Foundation

/// A chart as SVG elements, one per shape, with their marks as attributes.
struct SVGCanvas: ChartCanvas {
    private(set) var body = ""
    let width: Double
    let height: Double

    init(width: Double, height: Double) { (self.width, self.height) = (width, height) }

    var document: String {
        """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="DejaVu Sans, Verdana, sans-serif" font-size="13">
        <rect width="100%" height="100%" fill="white"/>
        \(body)</svg>

        """
    }

    mutating func rect(_ frame: ChartRect, fill: ChartColour?, opacity: Double, stroke: ChartColour?, marks: ChartMarks) {
        let opacity = opacity < 1 ? " fill-opacity=\"\(Self.f(opacity))\"" : ""
        body +=
            "<rect\(Self.attributes(marks)) x=\"\(Self.f(frame.x))\" y=\"\(Self.f(frame.y))\" width=\"\(Self.f(frame.width))\" height=\"\(Self.f(frame.height))\""
            + " fill=\"\(fill?.hex ?? "none")\"\(opacity)\(stroke.map { " stroke=\"\($0.hex)\"" } ?? "")/>\n"
    }

    mutating func line(_ from: ChartPoint, _ to: ChartPoint, colour: ChartColour, width: Double, dashed: Bool, marks: ChartMarks) {
        body +=
            "<line\(Self.attributes(marks)) x1=\"\(Self.f(from.x))\" y1=\"\(Self.f(from.y))\" x2=\"\(Self.f(to.x))\" y2=\"\(Self.f(to.y))\""
            + " stroke=\"\(colour.hex)\" stroke-width=\"\(Self.f(width))\"\(dashed ? " stroke-dasharray=\"6 4\"" : "")/>\n"
    }

    mutating func polyline(_ points: [ChartPoint], colour: ChartColour, width: Double, marks: ChartMarks) {
        let list = points.map { "\(Self.f($0.x)),\(Self.f($0.y))" }.joined(separator: " ")
        body +=
            "<polyline\(Self.attributes(marks)) fill=\"none\" stroke=\"\(colour.hex)\" stroke-width=\"\(Self.f(width))\" stroke-linejoin=\"round\" points=\"\(list)\"/>\n"
    }

    mutating func text(_ text: String, at point: ChartPoint, style: ChartTextStyle, marks: ChartMarks) {
        let rotate = style.vertical ? " transform=\"rotate(-90 \(Self.f(point.x)) \(Self.f(point.y)))\"" : ""
        body +=
            "<text\(Self.attributes(marks)) x=\"\(Self.f(point.x))\" y=\"\(Self.f(point.y))\" text-anchor=\"\(style.anchor.rawValue)\""
            + " font-size=\"\(Self.f(style.size))\"\(style.bold ? " font-weight=\"bold\"" : "") fill=\"\(style.colour.hex)\"\(rotate)>\(Self.escape(text))</text>\n"
    }

    private static func attributes(_ marks: ChartMarks) -> String {
        marks.attributes.map { " \($0.0)=\"\(escape($0.1))\"" }.joined()
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func f(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(format: "%.2f", value)
    }
}
