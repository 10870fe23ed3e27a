import Foundation
import NIOCore

// Field encodings of SPEC §3. Every reader either reads a whole field and moves the reader
// index past it, or throws and leaves the reader index where it was: no partial reads.
// Lengths and counts are checked against their limit and against the bytes that remain
// before anything is read or allocated for them.

extension ByteBuffer {
    // MARK: Fixed-width integers (SPEC §3.1: big-endian)

    @inline(__always)
    mutating func readU8(_ what: StaticString) throws(WireError) -> UInt8 {
        guard let v = readInteger(as: UInt8.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        return v
    }

    /// The byte at the reader index, without moving it.
    @inline(__always)
    func peekU8(_ what: StaticString) throws(WireError) -> UInt8 {
        guard let v = getInteger(at: readerIndex, as: UInt8.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        return v
    }

    @inline(__always)
    mutating func readU16(_ what: StaticString) throws(WireError) -> UInt16 {
        guard let v = readInteger(as: UInt16.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        return v
    }

    @inline(__always)
    mutating func readU32(_ what: StaticString) throws(WireError) -> UInt32 {
        guard let v = readInteger(as: UInt32.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        return v
    }

    @inline(__always)
    mutating func readU64(_ what: StaticString) throws(WireError) -> UInt64 {
        guard let v = readInteger(as: UInt64.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        return v
    }

    // MARK: Bool (SPEC §3.2: one byte, 0 or 1)

    @inline(__always)
    mutating func writeBool(_ value: Bool) { writeInteger(value ? 1 : 0, as: UInt8.self) }

    @inline(__always)
    mutating func readBool(_ what: StaticString) throws(WireError) -> Bool {
        guard let b = getInteger(at: readerIndex, as: UInt8.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        // SPEC §3.2: "A bool is the byte 0x00 (false) or 0x01 (true); any other byte is malformed."
        guard b <= 1 else { throw WireError(.malformed, "\(what) is a bool, byte 0x\(String(b, radix: 16)) is neither 0 nor 1") }
        moveReaderIndex(forwardBy: 1)
        return b == 1
    }

    // MARK: Varints (SPEC §3.3: unsigned LEB128, at most 10 bytes, minimal)

    @inline(__always)
    mutating func writeVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            writeInteger(UInt8(truncatingIfNeeded: v) | 0x80, as: UInt8.self)
            v >>= 7
        }
        writeInteger(UInt8(truncatingIfNeeded: v), as: UInt8.self)
    }

    /// The number of bytes `writeVarint(value)` writes.
    @inline(__always)
    static func varintSize(_ value: UInt64) -> Int {
        let bits = 64 - value.leadingZeroBitCount
        return bits == 0 ? 1 : (bits + 6) / 7
    }

    /// Peeks a varint at `index`: its value and size, without moving the reader index.
    @inline(__always)
    func peekVarint(at index: Int, _ what: StaticString) throws(WireError) -> (value: UInt64, size: Int) {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var i = 0
        while true {
            guard let byte = getInteger(at: index &+ i, as: UInt8.self) else {
                throw WireError(.truncated, "the payload ends inside \(what)")
            }
            if i == 9 {
                // SPEC §3.3: "The tenth byte carries bit 63 only: it MUST be 0x01."
                guard byte == 0x01 else {
                    throw WireError(.malformed, "\(what) is a varint of more than 64 bits")
                }
                return (result | (1 << 63), 10)
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                // SPEC §3.3: "The last byte of a varint of more than one byte MUST NOT be 0x00."
                guard byte != 0 || i == 0 else {
                    throw WireError(.nonCanonical, "\(what) is a varint with a non-minimal encoding")
                }
                return (result, i &+ 1)
            }
            shift &+= 7
            i &+= 1
        }
    }

    @inline(__always)
    mutating func readVarint(_ what: StaticString) throws(WireError) -> UInt64 {
        let (value, size) = try peekVarint(at: readerIndex, what)
        moveReaderIndex(forwardBy: size)
        return value
    }

    /// A varint that must fit in 32 bits (SPEC §3.3: "u32 varint").
    @inline(__always)
    mutating func readVarint32(_ what: StaticString) throws(WireError) -> UInt32 {
        let (value, size) = try peekVarint(at: readerIndex, what)
        guard value <= UInt64(UInt32.max) else { throw WireError(.malformed, "\(what) exceeds 32 bits") }
        moveReaderIndex(forwardBy: size)
        return UInt32(truncatingIfNeeded: value)
    }

    // MARK: Signed varints (SPEC §3.3: zigzag, then varint)

    @inline(__always)
    mutating func writeSignedVarint(_ value: Int64) {
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    @inline(__always)
    mutating func readSignedVarint(_ what: StaticString) throws(WireError) -> Int64 {
        let z = try readVarint(what)
        return Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
    }

    // MARK: Lengths and counts (SPEC §3.5, §3.7)

    /// Reads a length or count prefix, checks it against `max` (failing with `code`) and
    /// against the bytes that remain (each element takes at least `minElementSize` bytes).
    /// Does not move the reader index when it throws.
    @inline(__always)
    mutating func readCount(
        max: Int, minElementSize: Int = 1, _ what: StaticString, code: WireError.Code = .limitExceeded
    ) throws(WireError) -> Int {
        let (value, size) = try peekVarint(at: readerIndex, what)
        guard value <= UInt64(Swift.max(0, max)) else {
            throw WireError(code, "\(what) is \(value), the limit is \(max)")
        }
        let count = Int(truncatingIfNeeded: value)
        // count <= max <= Int.max and minElementSize is small: the product cannot overflow
        // for any limit below 2^40; use a checked multiply anyway.
        let (needed, overflow) = count.multipliedReportingOverflow(by: minElementSize)
        guard !overflow, needed <= readableBytes &- size else {
            throw WireError(.truncated, "\(what) of \(count) runs past the end of the payload")
        }
        moveReaderIndex(forwardBy: size)
        return count
    }

    // MARK: UUIDs (SPEC §3.4: 16 raw bytes)

    @inline(__always)
    mutating func writeUUID(_ uuid: UUID) {
        _ = withUnsafeBytes(of: uuid.uuid) { writeBytes($0) }
    }

    @inline(__always)
    mutating func readUUID(_ what: StaticString) throws(WireError) -> UUID {
        guard readableBytes >= 16 else { throw WireError(.truncated, "the payload ends inside \(what)") }
        let raw = withUnsafeReadableBytes { $0.loadUnaligned(as: uuid_t.self) }
        moveReaderIndex(forwardBy: 16)
        return UUID(uuid: raw)
    }

    // MARK: Strings (SPEC §3.5: varint byte length, then UTF-8)

    /// Writes a string after checking its length against `max` (the encoder enforces the
    /// same limits as the decoder).
    @inline(__always)
    mutating func writeString(_ string: String, max: Int, _ what: StaticString, code: WireError.Code = .limitExceeded) throws(WireError) {
        let count = string.utf8.count
        guard count <= max else { throw WireError(code, "\(what) is \(count) UTF-8 bytes, the limit is \(max)") }
        writeVarint(UInt64(count))
        writeString(string)
    }

    /// Reads a string of at most `max` bytes; validates UTF-8 without copying through an array.
    @inline(__always)
    mutating func readString(max: Int, _ what: StaticString, code: WireError.Code = .limitExceeded) throws(WireError) -> String {
        let (value, size) = try peekVarint(at: readerIndex, what)
        guard value <= UInt64(Swift.max(0, max)) else {
            throw WireError(code, "\(what) is \(value) UTF-8 bytes, the limit is \(max)")
        }
        let length = Int(truncatingIfNeeded: value)
        guard length <= readableBytes &- size else {
            throw WireError(.truncated, "\(what) of \(length) bytes runs past the end of the payload")
        }
        let string: String? = withUnsafeReadableBytes { raw in
            let bytes = UnsafeRawBufferPointer(rebasing: raw[size..<(size &+ length)])
            return String(validating: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        }
        guard let string else { throw WireError(.invalidUTF8, "\(what) is not valid UTF-8") }
        moveReaderIndex(forwardBy: size &+ length)
        return string
    }

    /// Whether the string at the reader index (length-prefixed) equals `literal`; used for
    /// fast paths on common values. Does not move the reader index.
    @inline(__always)
    func peekStringEquals(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard n < 0x80, getInteger(at: readerIndex, as: UInt8.self) == UInt8(n), readableBytes > n else { return false }
        return withUnsafeReadableBytes { raw in
            memcmp(raw.baseAddress! + 1, literal.utf8Start, n) == 0
        }
    }

    // MARK: Bytes (SPEC §3.6: varint length, then the bytes)

    @inline(__always)
    mutating func writeLengthPrefixedBytes(_ bytes: [UInt8]) {
        writeVarint(UInt64(bytes.count))
        writeBytes(bytes)
    }

    // MARK: Optionals (SPEC §3.8: presence byte 0 or 1, then the value if 1)

    @inline(__always)
    mutating func readPresence(_ what: StaticString) throws(WireError) -> Bool {
        guard let b = getInteger(at: readerIndex, as: UInt8.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        // SPEC §3.8: "The presence byte is 0x00 (absent) or 0x01 (present); any other byte is malformed."
        guard b <= 1 else { throw WireError(.malformed, "the presence byte of \(what) is 0x\(String(b, radix: 16))") }
        moveReaderIndex(forwardBy: 1)
        return b == 1
    }
}

/// Orders strings by their UTF-8 bytes: the canonical order of sets and maps (SPEC §3.7).
@inline(__always)
func utf8Less(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}
