import Testing

@testable import LaminaTransport

/// ``HTTP2FrameScanner`` finds the same DATA frames however the byte stream is cut into reads,
/// skips the client preface and payloads, and never reads past what it is given.
struct HTTP2FrameScannerTests {
    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, length: Int) -> [UInt8] {
        [
            UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags,
            UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff),
        ] + [UInt8](repeating: 0, count: length)
    }

    /// Frames of every kind, DATA among them (payloads of zeros that look like frame headers).
    static let frames: [(type: UInt8, flags: UInt8, stream: UInt32, length: Int)] = [
        (0x4, 0, 0, 0), (0x1, 0x4, 1, 30), (0x0, 0, 1, 0), (0x0, 0x1, 1, 16_384), (0x6, 0, 0, 8), (0x0, 0, 3, 0),
        (0x8, 0, 0, 4), (0x0, 0x8, 0x7fff_ffff, 300), (0x3, 0, 5, 4), (0x0, 0, 5, 1),
    ]

    static func scan(_ bytes: [UInt8], cuts: [Int]) -> [(Int32, UInt8)] {
        var scanner = HTTP2FrameScanner(server: true)
        var found: [(Int32, UInt8)] = []
        var start = 0
        for end in cuts + [bytes.count] where end >= start {
            bytes[start..<end].withUnsafeBytes { raw in scanner.scan(raw) { found.append(($0, $1)) } }
            start = end
        }
        return found
    }

    @Test func dataFramesAreFoundWhateverTheReads() {
        let bytes =
            Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
            + Self.frames.flatMap { Self.frame(type: $0.type, flags: $0.flags, stream: $0.stream, length: $0.length) }
        let expected = Self.frames.filter { $0.type == 0 }.map { (Int32($0.stream), $0.flags) }
        var generator = SystemRandomNumberGenerator()
        var cutsList: [[Int]] = [[], Array(0..<bytes.count)]  // whole, and one byte at a time
        for _ in 0..<200 {
            cutsList.append(
                (0..<Int.random(in: 1...20, using: &generator)).map { _ in
                    Int.random(in: 0...bytes.count, using: &generator)
                }.sorted())
        }
        for cuts in cutsList {
            let found = Self.scan(bytes, cuts: cuts)
            #expect(found.map(\.0) == expected.map(\.0) && found.map(\.1) == expected.map(\.1), "cuts \(cuts)")
        }
    }

    @Test func arbitraryBytesAreWalkedWithoutTrapping() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let bytes = (0..<Int.random(in: 0...2_000, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            let cuts = (0..<Int.random(in: 0...10, using: &generator)).map { _ in
                Int.random(in: 0...bytes.count, using: &generator)
            }.sorted()
            _ = Self.scan(bytes, cuts: cuts)
        }
    }
}
