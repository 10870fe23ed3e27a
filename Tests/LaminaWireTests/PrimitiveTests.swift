import NIOCore
import Testing

@testable import LaminaWire

/// Reads one field of the kind named by `op` from `bytes`: the value's description, or the
/// error's code, and where the reader index ended.
func readOne(_ op: String, _ bytes: [UInt8]) -> (value: String?, code: WireError.Code?, index: Int) {
    bytes.withUnsafeBytes { raw in
        var r = PayloadReader(raw)
        do {
            let value: String
            switch op {
            case "varint": value = String(try r.readVarint("v"))
            case "svarint": value = String(try r.readSignedVarint("s"))
            case "string": value = try r.readString(max: 10, "s")
            case "uuid": value = try r.readUUID("u").uuidString
            case "u64": value = String(try r.readU64("n"))
            case "hlc": value = try r.readHLC("h").description
            case "count": value = String(try r.readCount(max: 10, minElementSize: 2, "c"))
            default: value = "?"
            }
            return (value, nil, r.readerIndex)
        } catch {
            return (nil, (error as? WireError)?.code, r.readerIndex)
        }
    }
}

@Suite struct VarintTests {
    @Test(arguments: [UInt64(0), 1, 127, 128, 300, 16_383, 16_384, UInt64(UInt32.max), UInt64.max >> 1, UInt64.max])
    func roundTripsMinimally(_ value: UInt64) {
        var b = ByteBuffer()
        b.writeVarint(value)
        #expect(b.readableBytes == ByteBuffer.varintSize(value))
        let bytes = Support.bytes(b)
        let read = readOne("varint", bytes)
        #expect(read.value == String(value))
        #expect(read.index == bytes.count)
    }

    @Test func nonMinimalIsRefusedWithoutMoving() {
        let read = readOne("varint", [0x80, 0x00])
        #expect(read.code == .nonCanonical)
        #expect(read.index == 0)
    }

    @Test func overlongIsRefusedWithoutMoving() {
        let read = readOne("varint", [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02])
        #expect(read.code == .malformed)
        #expect(read.index == 0)
    }

    @Test(arguments: ["string", "uuid", "u64", "hlc", "count"])
    func shortReadsLeaveTheReaderIndex(_ op: String) {
        let read = readOne(op, [0x05, 0x61, 0x62])
        #expect(read.code == .truncated)
        #expect(read.index == 0)
    }

    @Test func zigzagRoundTrips() {
        for v: Int64 in [0, -1, 1, Int64.min, Int64.max, -1_700_000_000_000, 1_700_000_000_000] {
            var b = ByteBuffer()
            b.writeSignedVarint(v)
            #expect(readOne("svarint", Support.bytes(b)).value == String(v))
        }
    }
}

@Suite struct UTF8ValidationTests {
    func agrees(_ bytes: [UInt8]) -> Bool {
        let mine = bytes.withUnsafeBytes { isValidUTF8($0) }
        let stdlib = String(validating: bytes, as: UTF8.self) != nil
        return mine == stdlib
    }

    @Test func agreesWithTheStandardLibraryOnEdgeCases() {
        let cases: [[UInt8]] = [
            [], [0x00], [0x7F], [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF],
            [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80],
            [0xEF, 0xBF, 0xBF], [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xE2, 0x82], [0xF0, 0x9F, 0x98],
            Array("plain ascii, longer than eight bytes".utf8), Array("mixed äöü 漢字 😀 text".utf8),
            Array("12345678".utf8) + [0xC3], Array("1234567".utf8) + [0xC3, 0xA4],
        ]
        for c in cases { #expect(agrees(c), "\(c)") }
    }

    @Test func agreesWithTheStandardLibraryOnRandomBytes() {
        var rng = SplitMix64(seed: 0x07F8)
        let interesting: [UInt8] = [
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5,
            0xFF,
        ]
        for _ in 0..<50_000 {
            let n = Int.random(in: 0...12, using: &rng)
            let bytes = (0..<n).map { _ in
                Bool.random(using: &rng)
                    ? interesting[Int.random(in: 0..<interesting.count, using: &rng)]
                    : UInt8.random(in: 0...255, using: &rng)
            }
            #expect(agrees(bytes), "\(bytes)")
        }
    }
}
