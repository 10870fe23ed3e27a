import Foundation

/// PostgreSQL's binary wire formats of the values the store binds and reads (network byte
/// order): what the libpq driver sends as parameters and decodes from results.
enum LibpqBinary {
    /// Appends `value`'s binary form; false for NULL (no bytes).
    static func encode(_ value: PostgresValue, into out: inout [UInt8]) -> Bool {
        switch value {
        case .null: return false
        case .bigint(let v): append(v, to: &out)
        case .double(let v): append(Int64(bitPattern: v.bitPattern), to: &out)
        case .text(let v): out.append(contentsOf: v.utf8)
        case .bytea(let v): out.append(contentsOf: v)
        case .boolean(let v): out.append(v ? 1 : 0)
        case .bigints(let v):
            array(count: v.count, element: 20, into: &out) { i, out in
                append(Int32(8), to: &out)
                append(v[i], to: &out)
            }
        case .texts(let v):
            array(count: v.count, element: 25, into: &out) { i, out in
                append(Int32(v[i].utf8.count), to: &out)
                out.append(contentsOf: v[i].utf8)
            }
        case .byteas(let v):
            array(count: v.count, element: 17, into: &out) { i, out in
                append(Int32(v[i].count), to: &out)
                out.append(contentsOf: v[i])
            }
        case .booleans(let v):
            array(count: v.count, element: 16, into: &out) { i, out in
                append(Int32(1), to: &out)
                out.append(v[i] ? 1 : 0)
            }
        }
        return true
    }

    /// A one-dimensional array without NULLs: dimensions, flags, element type, then each element.
    private static func array(
        count: Int, element: Int32, into out: inout [UInt8], _ each: (Int, inout [UInt8]) -> Void
    ) {
        append(Int32(count == 0 ? 0 : 1), to: &out)
        append(Int32(0), to: &out)
        append(element, to: &out)
        guard count > 0 else { return }
        append(Int32(count), to: &out)
        append(Int32(1), to: &out)
        for i in 0..<count { each(i, &out) }
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    // MARK: Results

    /// A result cell's value from its binary form and its column's type OID.
    static func value(_ bytes: UnsafeRawBufferPointer, type: UInt32) -> SQLValue {
        switch type {
        case 20, 21, 23, 26:  // int8, int2, int4, oid
            switch bytes.count {
            case 2: return .integer(Int64(Int16(bigEndian: load(bytes))))
            case 4:
                let raw = UInt32(bigEndian: load(bytes))
                return .integer(type == 26 ? Int64(raw) : Int64(Int32(bitPattern: raw)))
            case 8: return .integer(Int64(bigEndian: load(bytes)))
            default: return .null
            }
        case 16:  // bool
            return .integer(bytes.first == 0 ? 0 : 1)
        case 17:  // bytea
            return .blob(Data(bytes))
        case 700:  // float4
            guard bytes.count == 4 else { return .null }
            return .real(Double(Float(bitPattern: UInt32(bigEndian: load(bytes)))))
        case 701:  // float8
            guard bytes.count == 8 else { return .null }
            return .real(Double(bitPattern: UInt64(bigEndian: load(bytes))))
        case 1700:  // numeric
            return numeric(bytes)
        case 3802:  // jsonb: a version byte, then the text
            return .text(String(decoding: bytes.dropFirst(), as: UTF8.self))
        default:  // text, varchar, name, json, and anything else read as its bytes
            return .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    private static func load<T: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> T {
        var value: T = 0
        withUnsafeMutableBytes(of: &value) {
            $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + MemoryLayout<T>.size]))
        }
        return value
    }

    /// `numeric`'s binary form (digit count, weight, sign, display scale, base-10000 digits):
    /// an integer when it has no fraction and fits, else a real.
    static func numeric(_ bytes: UnsafeRawBufferPointer) -> SQLValue {
        guard bytes.count >= 8 else { return .null }
        let count = Int(Int16(bigEndian: load(bytes, at: 0)))
        let weight = Int(Int16(bigEndian: load(bytes, at: 2)))
        let sign = UInt16(bigEndian: load(bytes, at: 4))
        guard sign != 0xC000, bytes.count >= 8 + 2 * count else { return .null }  // NaN
        var digits: [Int] = []
        for i in 0..<count { digits.append(Int(Int16(bigEndian: load(bytes, at: 8 + 2 * i)))) }
        // Integer part: digits 0...weight; any non-zero digit past it is a fraction.
        let hasFraction = digits.enumerated().contains { $0.offset > weight && $0.element != 0 }
        if !hasFraction, weight < 5 {
            var integer: Int64 = 0
            var overflow = false
            for i in 0...max(weight, 0) where weight >= 0 {
                let digit = i < digits.count ? Int64(digits[i]) : 0
                let (m, o1) = integer.multipliedReportingOverflow(by: 10_000)
                let (s, o2) = m.addingReportingOverflow(digit)
                overflow = overflow || o1 || o2
                integer = s
            }
            if !overflow { return .integer(sign == 0x4000 ? -integer : integer) }
        }
        var real = 0.0
        for (i, digit) in digits.enumerated() { real += Double(digit) * pow(10_000.0, Double(weight - i)) }
        return .real(sign == 0x4000 ? -real : real)
    }
}
