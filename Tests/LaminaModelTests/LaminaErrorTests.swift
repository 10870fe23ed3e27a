import Testing

@testable import LaminaModel

@Suite struct LaminaErrorTests {
    @Test func equalityAndHashIgnoreSourceLocation() {
        let a = ModelError(.noParts, "a message needs at least one part", file: "A.swift", line: 1)
        let b = ModelError(.noParts, "a message needs at least one part", file: "B.swift", line: 2)
        let c = ModelError(.noParts, "another reason", file: "A.swift", line: 1)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != c)
        #expect(Set([a, b, c]).count == 2)
        #expect(a.description == "no-parts: a message needs at least one part")
    }
}
