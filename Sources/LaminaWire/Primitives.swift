import Foundation
import NIOCore

// Field encodings of SPEC §3, the writing side. (Reading: `PayloadReader`.)

extension ByteBuffer {
    // MARK: Fixed-width integers (SPEC §3.1: big-endian)

    // MARK: Bool (SPEC §3.2: one byte, 0 or 1)

    @inline(__always)
    mutating func writeBool(_ value: Bool) { writeInteger(value ? 1 : 0, as: UInt8.self) }

    // MARK: Varints (SPEC §3.3: unsigned LEB128, at most 10 bytes, minimal)

    /// Writes a minimal varint with one buffer write (SPEC §3.3).
    @inline(__always)
    mutating func writeVarint(_ value: UInt64) {
        if value < 0x80 {
            writeInteger(UInt8(truncatingIfNeeded: value), as: UInt8.self)
            return
        }
        var scratch: (UInt64, UInt16) = (0, 0)  // 10 bytes: the longest varint
        let count = withUnsafeMutableBytes(of: &scratch) { p -> Int in
            var v = value
            var n = 0
            while v >= 0x80 {
                p[n] = UInt8(truncatingIfNeeded: v) | 0x80
                v >>= 7
                n &+= 1
            }
            p[n] = UInt8(truncatingIfNeeded: v)
            return n &+ 1
        }
        _ = withUnsafeBytes(of: &scratch) { p in writeBytes(UnsafeRawBufferPointer(rebasing: p[0..<count])) }
    }

    /// The number of bytes `writeVarint(value)` writes.
    @inline(__always)
    static func varintSize(_ value: UInt64) -> Int {
        let bits = 64 - value.leadingZeroBitCount
        return bits == 0 ? 1 : (bits + 6) / 7
    }

    // MARK: Signed varints (SPEC §3.3: zigzag, then varint)

    @inline(__always)
    mutating func writeSignedVarint(_ value: Int64) {
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    // MARK: Lengths and counts (SPEC §3.5, §3.7)

    // MARK: UUIDs (SPEC §3.4: 16 raw bytes)

    @inline(__always)
    mutating func writeUUID(_ uuid: UUID) {
        _ = withUnsafeBytes(of: uuid.uuid) { writeBytes($0) }
    }

    // MARK: Strings (SPEC §3.5: varint byte length, then UTF-8)

    /// Writes a string after checking its length against `max` (the encoder enforces the
    /// same limits as the decoder).
    @inline(__always)
    mutating func writeString(_ string: String, max: Int, _ what: StaticString, code: WireError.Code = .limitExceeded)
        throws(WireError)
    {
        let count = string.utf8.count
        guard count <= max else { throw WireError(code, "\(what) is \(count) UTF-8 bytes, the limit is \(max)") }
        writeVarint(UInt64(count))
        writeString(string)
    }

    // MARK: Bytes (SPEC §3.6: varint length, then the bytes)

    @inline(__always)
    mutating func writeLengthPrefixedBytes(_ bytes: [UInt8]) {
        writeVarint(UInt64(bytes.count))
        writeBytes(bytes)
    }

    // MARK: Optionals (SPEC §3.8: presence byte 0 or 1, then the value if 1)

}

/// Orders strings by their UTF-8 bytes: the canonical order of sets and maps (SPEC §3.7).
@inline(__always)
func utf8Less(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}
