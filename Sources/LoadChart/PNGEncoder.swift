import Foundation

/// Writes RGB pixels as a PNG (8 bits a channel, no interlace): each row with PNG's `Up` filter, the data deflated
/// with runs only (``zlib(_:)``).
enum PNGEncoder {
    static func encode(width: Int, height: Int, rgb pixels: [UInt8]) -> [UInt8] {
        precondition(pixels.count == width * height * 3, "one RGB triple per pixel")
        let stride = width * 3
        var raw: [UInt8] = []
        raw.reserveCapacity((stride + 1) * height)
        for row in 0..<height {
            raw.append(2)  // Up: each byte less the byte above it
            for column in 0..<stride {
                let above = row > 0 ? pixels[(row - 1) * stride + column] : 0
                raw.append(pixels[row * stride + column] &- above)
            }
        }
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        header += bigEndian(UInt32(width)) + bigEndian(UInt32(height))
        header += [8, 2, 0, 0, 0]  // 8 bits, RGB, deflate, adaptive filters, no interlace
        chunk("IHDR", header, into: &png)
        chunk("IDAT", zlib(raw), into: &png)
        chunk("IEND", [], into: &png)
        return png
    }

    /// A zlib stream of one deflate block with the fixed Huffman codes (RFC 1951, 3.2.6), where every repeat of the
    /// byte before is a match at distance 1. After the `Up` filter a chart is mostly runs of zeros, so this small
    /// encoder makes the 1.7 MB of a chart about 130 KB, and the binary needs no compression library.
    static func zlib(_ data: [UInt8]) -> [UInt8] {
        var bits = BitWriter()
        bits.write(1, count: 1)  // the final block
        bits.write(1, count: 2)  // fixed Huffman codes
        var index = 0
        while index < data.count {
            var run = 0
            if index > 0 {
                while run < 258, index + run < data.count, data[index + run] == data[index - 1] { run += 1 }
            }
            if run >= 3 {
                bits.length(run)
                bits.write(0, count: 5)  // distance code 0: distance 1, no extra bits
                index += run
            } else {
                bits.literal(Int(data[index]))
                index += 1
            }
        }
        bits.literal(256)  // end of block
        var (a, b): (UInt32, UInt32) = (1, 0)
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return [0x78, 0x01] + bits.finish() + bigEndian(b << 16 | a)
    }

    /// Bits least significant first, as deflate packs them; Huffman codes go most significant bit first.
    struct BitWriter {
        private(set) var bytes: [UInt8] = []
        private var buffer: UInt32 = 0
        private var filled = 0

        mutating func write(_ value: Int, count: Int) {
            buffer |= UInt32(value) << filled
            filled += count
            while filled >= 8 {
                bytes.append(UInt8(buffer & 0xFF))
                buffer >>= 8
                filled -= 8
            }
        }

        mutating func code(_ code: Int, count: Int) {
            var reversed = 0
            for bit in 0..<count where code >> bit & 1 == 1 { reversed |= 1 << (count - 1 - bit) }
            write(reversed, count: count)
        }

        /// A literal byte (0 to 255) or the end of the block (256), in the fixed code.
        mutating func literal(_ value: Int) {
            switch value {
            case 0...143: code(0x30 + value, count: 8)
            case 144...255: code(0x190 + value - 144, count: 9)
            default: code(value - 256, count: 7)
            }
        }

        static let lengthBases = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
        static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]

        /// A match length (3 to 258): its symbol (257 to 285) in the fixed code, then its extra bits.
        mutating func length(_ length: Int) {
            let slot = Self.lengthBases.lastIndex { $0 <= length } ?? 0
            let symbol = 257 + slot
            if symbol <= 279 { code(symbol - 256, count: 7) } else { code(0xC0 + symbol - 280, count: 8) }
            write(length - Self.lengthBases[slot], count: Self.lengthExtra[slot])
        }

        mutating func finish() -> [UInt8] {
            if filled > 0 { bytes.append(UInt8(buffer & 0xFF)) }
            (buffer, filled) = (0, 0)
            return bytes
        }
    }

    private static func chunk(_ type: String, _ data: [UInt8], into png: inout [UInt8]) {
        let typed = Array(type.utf8) + data
        png += bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        (0..<8).reduce(UInt32(n)) { c, _ in c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        ~bytes.reduce(UInt32.max) { crc, byte in crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
