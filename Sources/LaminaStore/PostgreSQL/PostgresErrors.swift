import Foundation

/// How PostgreSQL's failures map to `StorageError`s, whichever driver reported them.
enum PostgresErrors {
    /// A failure the server reported: its SQLSTATE, message, and (constraint violations) table
    /// and detail.
    static func storageError(
        state: String, message: String, table: String?, detail: String?, file: String = #fileID, line: Int = #line
    ) -> StorageError {
        if state.hasPrefix("23") {
            // Worded as SQLite words it ("UNIQUE constraint failed: table.column, ..."),
            // which is what the storage code matches on.
            let table = table ?? "?"
            var columns: [String] = []
            if let detail, let open = detail.range(of: "Key ("),
                let close = detail.range(of: ")=", range: open.upperBound..<detail.endIndex)
            {
                columns = detail[open.upperBound..<close.lowerBound].split(separator: ",").map {
                    "\(table).\($0.trimmingCharacters(in: .whitespaces))"
                }
            }
            let kind =
                state == "23505"
                ? "UNIQUE" : state == "23503" ? "FOREIGN KEY" : state == "23502" ? "NOT NULL" : "CHECK"
            return StorageError(
                .constraintViolation, "\(kind) constraint failed: \(columns.joined(separator: ", ")) (\(message))",
                file: file, line: line)
        }
        if state == "40P01" || state == "40001" {
            // Another node's transaction locked the same feed heads in the other order.
            return StorageError(
                .writeConflict, "PostgreSQL undid a write that collided with another node's (\(state)): \(message)",
                file: file, line: line)
        }
        if state == "28P01" || state == "28000" {
            return StorageError(
                .authenticationFailed, "PostgreSQL refused the credentials: \(message)", file: file, line: line)
        }
        if state.hasPrefix("08") || state.hasPrefix("57P") {
            return StorageError(
                .databaseUnavailable, "PostgreSQL connection failed (\(state)): \(message)", file: file, line: line)
        }
        return StorageError(.database, "PostgreSQL error \(state): \(message)", file: file, line: line)
    }
}

/// PostgreSQL's text forms of values, as both drivers read them.
enum PostgresText {
    /// `bytea`'s hex text form (`\x0aff`) as bytes.
    static func bytea(_ text: String) -> Data {
        guard text.hasPrefix("\\x") else { return Data(text.utf8) }
        var out = Data(capacity: (text.utf8.count - 2) / 2)
        var high: UInt8?
        for c in text.utf8.dropFirst(2) {
            guard let nibble = hexValue(c) else { continue }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return out
    }

    /// A `numeric`'s text as an integer when it is one, else a real.
    static func number(_ text: String) -> SQLValue {
        if let integer = Int64(text) { return .integer(integer) }
        return Double(text).map { .real($0) } ?? .null
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
