import Foundation

/// A bitmap font for the PNG chart: printable ASCII, each glyph's coverage (0 to 15) per pixel, in rows of a fixed
/// height whose baseline is ``ascent`` pixels down. The glyphs are generated (`scripts/generate-chart-font`); a
/// character outside printable ASCII is drawn as `?`.
struct ChartFont: Sendable {
    struct Glyph: Sendable {
        let advance: Int
        /// Where the bitmap starts, from the pen (negative: it reaches back, as `j` does).
        let left: Int
        let width: Int
        let coverage: String
    }

    let size: Int
    let ascent: Int
    let height: Int
    let glyphs: [Glyph]

    /// A glyph's coverage, row by row, 0 to 15 each pixel.
    func pixels(of glyph: Glyph) -> [UInt8] {
        let bytes = Data(base64Encoded: glyph.coverage) ?? Data()
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(byte >> 4)
            out.append(byte & 0xF)
        }
        return out
    }

    func glyph(_ scalar: Unicode.Scalar) -> Glyph {
        let index = (32...126).contains(scalar.value) ? Int(scalar.value) - 32 : Int(UInt8(ascii: "?")) - 32
        return glyphs[index]
    }

    /// How wide `text` is drawn, in pixels.
    func width(of text: String) -> Int { text.unicodeScalars.reduce(0) { $0 + glyph($1).advance } }
}
