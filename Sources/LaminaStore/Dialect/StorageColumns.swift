import Foundation
import LaminaModel

/// How model values are laid out in columns. Kept in one place so every query agrees.
///
/// - Identifiers (UUIDs) are 16-byte BLOBs.
/// - A `NodeID` (an unsigned 64-bit number) is stored as a signed INTEGER with its top bit
///   flipped, which keeps SQLite's signed order equal to the unsigned order.
/// - An HLC reading is three INTEGER columns `<prefix>_physical`, `<prefix>_logical`,
///   `<prefix>_node`; row-value comparisons over them give the HLC's total order.
enum Columns {
    static func blob(_ uuid: UUID) -> Data {
        withUnsafeBytes(of: uuid.uuid) { Data($0) }
    }

    static func uuid(_ data: Data?, column: String) throws(StorageError) -> UUID {
        guard let data, data.count == 16 else {
            throw StorageError(.corrupt, "column \(column) does not hold a 16-byte identifier")
        }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { $0.copyBytes(from: data) }
        return UUID(uuid: bytes)
    }

    /// Byte strings as a JSON array of hex strings (PostgreSQL: `decode(x, 'hex')` of each).
    static func jsonHex(_ values: [Data]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, value) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            for byte in value {
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0xF)])
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Texts as a JSON array.
    static func jsonText(_ values: [String]) throws(StorageError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(values), as: UTF8.self)
        } catch {
            throw StorageError(.invalidArgument, "texts that do not encode as JSON: \(error)")
        }
    }

    static func node(_ node: NodeID) -> Int64 { Int64(bitPattern: node.rawValue ^ (1 << 63)) }
    static func node(_ value: Int64) -> NodeID { NodeID(UInt64(bitPattern: value) ^ (1 << 63)) }

    /// The three column values of an HLC reading. Physical time beyond `Int64.max` is refused.
    static func hlc(_ t: HLCTimestamp) throws(StorageError) -> (Int64, Int64, Int64) {
        guard t.physical <= UInt64(Int64.max) else {
            throw StorageError(
                .invalidArgument, "an HLC physical time is at most \(Int64.max), this one is \(t.physical)")
        }
        return (Int64(t.physical), Int64(t.logical), node(t.node))
    }

    /// Reads an HLC reading from the columns `<prefix>_physical`, `_logical`, `_node`.
    static func hlc(_ row: Row, _ prefix: String) throws(StorageError) -> HLCTimestamp {
        let physical: Int64? = row["\(prefix)_physical"]
        let logical: Int64? = row["\(prefix)_logical"]
        let node: Int64? = row["\(prefix)_node"]
        guard let physical, let logical, let node, physical >= 0, logical >= 0, logical <= Int64(UInt32.max) else {
            throw StorageError(.corrupt, "columns \(prefix)_* do not hold an HLC reading")
        }
        return HLCTimestamp(physical: UInt64(physical), logical: UInt32(logical), node: Self.node(node))
    }

    /// Reads an HLC reading from three columns by position, starting at `index`.
    static func hlc(_ row: some ColumnRow, from index: Int) throws(StorageError) -> HLCTimestamp {
        let physical = row.int64(index)
        let logical = row.int64(index + 1)
        let node = row.int64(index + 2)
        guard !row.isNull(index), !row.isNull(index + 1), !row.isNull(index + 2),
            physical >= 0, logical >= 0, logical <= Int64(UInt32.max)
        else {
            throw StorageError(.corrupt, "columns \(index)...\(index + 2) do not hold an HLC reading")
        }
        return HLCTimestamp(physical: UInt64(physical), logical: UInt32(logical), node: Self.node(node))
    }

    static func user(_ row: some ColumnRow, _ index: Int) throws(StorageError) -> UserID {
        guard let raw = row.text(index), let user = try? UserID(raw) else {
            throw StorageError(.corrupt, "column \(index) does not hold a user id")
        }
        return user
    }

    static func optionalHLC(_ row: Row, _ prefix: String) throws(StorageError) -> HLCTimestamp? {
        let physical: Int64? = row["\(prefix)_physical"]
        guard physical != nil else { return nil }
        return try hlc(row, prefix)
    }

    static func user(_ row: Row, _ column: String) throws(StorageError) -> UserID {
        let raw: String? = row[column]
        guard let raw, let user = try? UserID(raw) else {
            throw StorageError(.corrupt, "column \(column) does not hold a user id")
        }
        return user
    }

    static func timestamp(_ row: Row, _ column: String) throws(StorageError) -> Timestamp {
        let ms: Int64? = row[column]
        guard let ms else { throw StorageError(.corrupt, "column \(column) does not hold a timestamp") }
        return Timestamp(millisecondsSince1970: ms)
    }

    static func optionalTimestamp(_ row: Row, _ column: String) -> Timestamp? {
        let ms: Int64? = row[column]
        return ms.map { Timestamp(millisecondsSince1970: $0) }
    }

    static func bytes(_ row: Row, _ column: String) throws(StorageError) -> [UInt8] {
        let data: Data? = row[column]
        guard let data else { throw StorageError(.corrupt, "column \(column) holds no bytes") }
        return [UInt8](data)
    }

    /// Narrows an unsigned count or size for an INTEGER column.
    static func int64(_ value: UInt64, _ what: String) throws(StorageError) -> Int64 {
        guard value <= UInt64(Int64.max) else {
            throw StorageError(.invalidArgument, "\(what) is at most \(Int64.max), got \(value)")
        }
        return Int64(value)
    }
}
