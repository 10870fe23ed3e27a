import LaminaTransport
import LaminaWireFuzzChecks

extension NodeFuzzChecks {
    /// The HTTP/2 frame scanner the node runs ahead of nghttp2 on every inbound byte
    /// (``HTTP2FrameScanner``). The first input byte chooses the role (bit 0: server, whose
    /// stream starts with the 24-byte preface) and a read size (the other bits); the rest is the
    /// connection's byte stream. Fed whole, one byte per read, in reads of the chosen size and in
    /// reads of growing sizes, the scanner reports the same DATA frames (stream id and flags,
    /// in order) as a plain walk of the whole stream, and reads nothing outside what it is given.
    public static func checkHTTP2FrameScanner(_ input: [UInt8]) throws(PropertyViolation) {
        guard let first = input.first else { return }
        let server = first & 1 == 1
        let stream = Array(input.dropFirst())
        let expected = referenceDataFrames(stream, server: server)
        let size = Int(first >> 1) + 1
        let readings: [(String, [Int])] = [
            ("whole", [stream.count]),
            ("one byte per read", Array(repeating: 1, count: stream.count)),
            ("reads of \(size)", Array(repeating: size, count: stream.count / size + 1)),
            ("growing reads from \(size)", Array((size...).prefix(stream.count / size + 1))),
        ]
        for (label, sizes) in readings {
            let found = scan(stream, server: server, readSizes: sizes)
            guard found.count == expected.count, zip(found, expected).allSatisfy({ $0 == $1 }) else {
                throw PropertyViolation(
                    property: "http2-frame-scanner",
                    detail: "\(label): found \(found.prefix(20)) (\(found.count)), expected \(expected.prefix(20)) "
                        + "(\(expected.count))",
                    input: input)
            }
        }
    }

    /// The scanner over `stream` cut into reads of `readSizes` (the last read takes what is left).
    static func scan(_ stream: [UInt8], server: Bool, readSizes: [Int]) -> [DataFrame] {
        var scanner = HTTP2FrameScanner(server: server)
        var found: [DataFrame] = []
        var start = 0
        for size in readSizes where start < stream.count {
            let end = min(stream.count, start + size)
            // Each read in its own buffer, so ASan sees any read past its end.
            let read = Array(stream[start..<end])
            read.withUnsafeBytes { raw in
                scanner.scan(raw) { found.append(DataFrame(stream: $0, flags: $1)) }
            }
            start = end
        }
        return found
    }

    /// A DATA frame's header as the scanner reports it.
    struct DataFrame: Equatable, CustomStringConvertible {
        var stream: Int32
        var flags: UInt8
        var description: String { "\(stream)/\(flags)" }
    }

    /// RFC 9113 §4.1 read directly over the whole stream: after the preface (server role), a
    /// 9-byte header of 24-bit length, type, flags, and a 31-bit stream id, then the payload.
    static func referenceDataFrames(_ stream: [UInt8], server: Bool) -> [DataFrame] {
        var frames: [DataFrame] = []
        var index = server ? 24 : 0
        while index + 9 <= stream.count {
            let length = Int(stream[index]) << 16 | Int(stream[index + 1]) << 8 | Int(stream[index + 2])
            if stream[index + 3] == 0 {
                var id: UInt32 = 0
                for byte in stream[index + 5..<index + 9] { id = id << 8 | UInt32(byte) }
                frames.append(DataFrame(stream: Int32(id & 0x7fff_ffff), flags: stream[index + 4]))
            }
            index += 9 + length
        }
        return frames
    }
}
