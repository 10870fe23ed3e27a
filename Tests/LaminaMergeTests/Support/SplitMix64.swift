import Foundation

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, seedable generator so every
/// randomized test is reproducible from the seed it prints on failure.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private(set) var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The base seed: `LAMINA_MERGE_SEED` from the environment (decimal or 0x-hex) to
    /// replay a failure, else a fixed default so runs are reproducible.
    static let baseSeed: UInt64 = {
        guard let text = ProcessInfo.processInfo.environment["LAMINA_MERGE_SEED"] else { return 0x1A31_4A00_C0FF_EE01 }
        if text.hasPrefix("0x"), let v = UInt64(text.dropFirst(2), radix: 16) { return v }
        return UInt64(text) ?? 0x1A31_4A00_C0FF_EE01
    }()

    /// The seed of case `index` of a test named `name`: independent streams per test and case.
    static func seed(_ name: String, case index: Int) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in name.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
        var mixer = SplitMix64(seed: baseSeed ^ h ^ (UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
        return mixer.next()
    }

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
}
