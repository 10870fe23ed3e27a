import Testing

@testable import LaminaModel

/// The ASCII shortcuts in MIME type and user id validation agree with the Unicode properties.
@Suite struct ASCIIFastPathTests {
    @Test func asciiShortcutsAgreeWithUnicodeProperties() throws {
        for v in UInt32(0)..<0x80 {
            let scalar = try #require(Unicode.Scalar(v))
            let control = scalar.properties.generalCategory == .control
            #expect(UserID.isControl(scalar) == control, "U+\(String(v, radix: 16))")
            let mimeRefuses = (try? MIMEType("a\(Character(scalar))b/c")) == nil
            let expected = scalar.properties.isWhitespace || control || scalar == "/"
            #expect(mimeRefuses == expected, "U+\(String(v, radix: 16))")
        }
    }
}
