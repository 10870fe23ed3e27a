/// The words of the search benches (`device-search`, `node-search`): pronounceable words drawn
/// Zipf-like (word k with weight 1/(k+1)), messages of 8 to 24 of them, and the four query shapes
/// both benches time in turn (a common word, a rare word, two words, a 3-letter prefix).
struct SearchVocabulary {
    let words: [String]
    /// Harmonic partial sums: word k is drawn when a uniform x falls at or below `sums[k]`.
    private let sums: [Double]
    private var random = SystemRandomNumberGenerator()

    init(size: Int) {
        words = (0..<size).map(Self.word)
        var sums: [Double] = []
        var total = 0.0
        for k in 0..<size {
            total += 1 / Double(k + 1)
            sums.append(total)
        }
        self.sums = sums
    }

    /// One word, by inverse transform over the harmonic sums.
    mutating func draw() -> String {
        let x = Double.random(in: 0..<sums[sums.count - 1], using: &random)
        var lo = 0
        var hi = sums.count - 1
        while lo < hi {
            let mid = (lo + hi) / 2
            if sums[mid] < x { lo = mid + 1 } else { hi = mid }
        }
        return words[lo]
    }

    /// A message's text: 8 to 24 drawn words.
    mutating func text() -> String {
        (0..<Int.random(in: 8...24, using: &random)).map { _ in draw() }.joined(separator: " ")
    }

    /// Query `q`'s text: by `q % 4` a common word, a rare word, two words, a 3-letter prefix.
    mutating func query(_ q: Int) -> String {
        switch q % 4 {
        case 0: words[Int.random(in: 0..<min(50, words.count), using: &random)]
        case 1: words[Int.random(in: words.count / 2..<words.count, using: &random)]
        case 2: draw() + " " + draw()
        default: String(draw().prefix(3))
        }
    }

    /// A pronounceable word for index `k` (distinct for distinct k).
    static func word(_ k: Int) -> String {
        let consonants = Array("bcdfghjklmnprstvz")
        let vowels = Array("aeiou")
        var n = k
        var out = ""
        repeat {
            out.append(consonants[n % consonants.count])
            n /= consonants.count
            out.append(vowels[n % vowels.count])
            n /= vowels.count
        } while n > 0
        return out
    }
}
