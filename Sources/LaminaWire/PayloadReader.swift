import Foundation

/// Reads the fields of one whole, already buffered payload (SPEC §3) straight from its
/// bytes: no per-field buffer bookkeeping, no copies except into the values' own storage.
/// Every read either reads a whole field and moves `readerIndex` past it, or throws and
/// leaves `readerIndex` where it was. Lengths and counts are checked against their limit
/// and against the bytes that remain before anything is read or allocated for them.
struct PayloadReader {
    /// Valid only while the buffer it came from is borrowed (see `Frame.decodePayload`).
    private let bytes: UnsafeRawBufferPointer
    private(set) var readerIndex: Int = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var readableBytes: Int { bytes.count &- readerIndex }

    @inline(__always)
    mutating func moveReaderIndex(to index: Int) {
        precondition(index >= 0 && index <= bytes.count)
        readerIndex = index
    }

    @inline(__always)
    mutating func moveReaderIndex(forwardBy n: Int) {
        precondition(n >= 0 && n <= readableBytes)
        readerIndex &+= n
    }

    @inline(__always)
    private func byte(at offset: Int) -> UInt8? {
        let i = readerIndex &+ offset
        return i < bytes.count ? bytes[i] : nil
    }

    @inline(__always)
    private func load<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        guard readableBytes >= MemoryLayout<T>.size else { return nil }
        return T(bigEndian: bytes.loadUnaligned(fromByteOffset: readerIndex, as: T.self))
    }

    // MARK: Fixed-width integers (SPEC §3.1: big-endian)

    @inline(__always)
    func peekU8(_ what: StaticString) throws(WireError) -> UInt8 {
        guard let v = byte(at: 0) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        return v
    }

    @inline(__always)
    mutating func readU8(_ what: StaticString) throws(WireError) -> UInt8 {
        let v = try peekU8(what)
        readerIndex &+= 1
        return v
    }

    @inline(__always)
    mutating func readU16(_ what: StaticString) throws(WireError) -> UInt16 {
        guard let v = load(UInt16.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        readerIndex &+= 2
        return v
    }

    @inline(__always)
    mutating func readU32(_ what: StaticString) throws(WireError) -> UInt32 {
        guard let v = load(UInt32.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        readerIndex &+= 4
        return v
    }

    @inline(__always)
    mutating func readU64(_ what: StaticString) throws(WireError) -> UInt64 {
        guard let v = load(UInt64.self) else { throw WireError(.truncated, "the payload ends inside \(what)") }
        readerIndex &+= 8
        return v
    }

    // MARK: Bool (SPEC §3.2)

    @inline(__always)
    mutating func readBool(_ what: StaticString) throws(WireError) -> Bool {
        let b = try peekU8(what)
        // SPEC §3.2: "A bool is the byte 0x00 (false) or 0x01 (true); any other byte is `malformed`."
        guard b <= 1 else {
            throw WireError(.malformed, "\(what) is a bool, byte 0x\(String(b, radix: 16)) is neither 0 nor 1")
        }
        readerIndex &+= 1
        return b == 1
    }

    // MARK: Optionals (SPEC §3.8)

    @inline(__always)
    mutating func readPresence(_ what: StaticString) throws(WireError) -> Bool {
        let b = try peekU8(what)
        // SPEC §3.8: "The presence byte is 0x00 (absent) or 0x01 (present); any other byte is `malformed`."
        guard b <= 1 else { throw WireError(.malformed, "the presence byte of \(what) is 0x\(String(b, radix: 16))") }
        readerIndex &+= 1
        return b == 1
    }

    // MARK: Varints (SPEC §3.3)

    /// A varint at `offset` bytes past the reader index: its value and size. Does not move.
    @inline(__always)
    func peekVarint(at offset: Int = 0, _ what: StaticString) throws(WireError) -> (value: UInt64, size: Int) {
        // Fast path: one byte.
        if let first = byte(at: offset), first < 0x80 { return (UInt64(first), 1) }
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var i = 0
        while true {
            guard let b = byte(at: offset &+ i) else { throw WireError(.truncated, "the payload ends inside \(what)") }
            if i == 9 {
                // SPEC §3.3: "The tenth byte carries bit 63 only: it MUST be 0x01."
                guard b == 0x01 else { throw WireError(.malformed, "\(what) is a varint of more than 64 bits") }
                return (result | (1 << 63), 10)
            }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 {
                // SPEC §3.3: "the last byte of a varint of 2 to 9 bytes MUST NOT be 0x00".
                guard b != 0 || i == 0 else {
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
        let (value, size) = try peekVarint(what)
        readerIndex &+= size
        return value
    }

    /// A varint that must fit in 32 bits (SPEC §3.3: "varint32").
    @inline(__always)
    mutating func readVarint32(_ what: StaticString) throws(WireError) -> UInt32 {
        let (value, size) = try peekVarint(what)
        guard value <= UInt64(UInt32.max) else { throw WireError(.malformed, "\(what) exceeds 32 bits") }
        readerIndex &+= size
        return UInt32(truncatingIfNeeded: value)
    }

    /// A zigzag varint (SPEC §3.3: "svarint").
    @inline(__always)
    mutating func readSignedVarint(_ what: StaticString) throws(WireError) -> Int64 {
        let z = try readVarint(what)
        return Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
    }

    // MARK: Lengths and counts (SPEC §3.5, §3.7)

    /// Reads a length or count prefix, checks it against `max` (failing with `code`) and
    /// against the bytes that remain (each element takes at least `minElementSize` bytes).
    @inline(__always)
    mutating func readCount(
        max: Int, minElementSize: Int = 1, _ what: StaticString, code: WireError.Code = .limitExceeded
    ) throws(WireError) -> Int {
        let (value, size) = try peekVarint(what)
        guard value <= UInt64(Swift.max(0, max)) else {
            throw WireError(code, "\(what) is \(value), the limit is \(max)")
        }
        let count = Int(truncatingIfNeeded: value)
        let (needed, overflow) = count.multipliedReportingOverflow(by: minElementSize)
        guard !overflow, needed <= readableBytes &- size else {
            throw WireError(.truncated, "\(what) of \(count) runs past the end of the payload")
        }
        readerIndex &+= size
        return count
    }

    // MARK: UUIDs (SPEC §3.4)

    @inline(__always)
    mutating func readUUID(_ what: StaticString) throws(WireError) -> UUID {
        guard readableBytes >= 16 else { throw WireError(.truncated, "the payload ends inside \(what)") }
        let raw = bytes.loadUnaligned(fromByteOffset: readerIndex, as: uuid_t.self)
        readerIndex &+= 16
        return UUID(uuid: raw)
    }

    // MARK: Strings (SPEC §3.5)

    /// Reads a string of at most `max` bytes, validating UTF-8 on the payload's own bytes.
    @inline(__always)
    mutating func readString(max: Int, _ what: StaticString, code: WireError.Code = .limitExceeded) throws(WireError)
        -> String
    {
        let (value, size) = try peekVarint(what)
        guard value <= UInt64(Swift.max(0, max)) else {
            throw WireError(code, "\(what) is \(value) UTF-8 bytes, the limit is \(max)")
        }
        let length = Int(truncatingIfNeeded: value)
        guard length <= readableBytes &- size else {
            throw WireError(.truncated, "\(what) of \(length) bytes runs past the end of the payload")
        }
        let start = readerIndex &+ size
        let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<(start &+ length)])
        // SPEC §3.5: "The bytes MUST be well-formed UTF-8." Once validated, decoding keeps
        // the bytes exactly as they are.
        guard isValidUTF8(slice) else { throw WireError(.invalidUTF8, "\(what) is not valid UTF-8") }
        readerIndex = start &+ length
        return String(decoding: slice.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }

    /// Whether the length-prefixed string at the reader index equals `literal` (a fast path
    /// for common values). Does not move.
    @inline(__always)
    func peekStringEquals(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard n < 0x80, byte(at: 0) == UInt8(n), readableBytes > n else { return false }
        return memcmp(bytes.baseAddress! + readerIndex + 1, literal.utf8Start, n) == 0
    }

    // MARK: Bytes (SPEC §3.6)

    /// `length` raw bytes as an array (the payload's own storage), or nil when fewer remain.
    @inline(__always)
    mutating func readBytes(length: Int) -> [UInt8]? {
        guard length >= 0, length <= readableBytes else { return nil }
        let out = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[readerIndex..<(readerIndex &+ length)]))
        readerIndex &+= length
        return out
    }
}
