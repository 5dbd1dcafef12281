/// SplitMix64 (Steele, Lea and Flood 2014): a tiny generator whose whole state is one number, so a seed reproduces
/// its sequence (the seeded tests print theirs), and whose output function is a bijection (request ids: a counter
/// through it never repeats). Not for secrets.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    package static let golden: UInt64 = 0x9E37_79B9_7F4A_7C15
    package var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= Self.golden
        return Self.finalise(state)
    }

    /// The output function: a bijection of `UInt64`.
    package static func finalise(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
