/// A JSON text (RFC 8259) parsed by hand into a ``JSONValue``, for the packets a Client API
/// WebSocket receives: one pass over the UTF-8 bytes, where `JSONDecoder` into `JSONValue`
/// tries each scalar type in turn and throws on every miss.
///
/// The same values `JSONDecoder` gives: a number without fraction or exponent that fits in 64
/// bits is ``JSONValue/integer(_:)``, any other ``JSONValue/number(_:)``; of duplicate keys the
/// last wins. Refused: anything RFC 8259 does not allow (bare control characters in strings,
/// lone surrogate escapes, leading zeros, trailing commas or text), and nesting deeper than
/// ``maxDepth``.
struct JSONTextParser {
    /// Arrays and objects nested deeper than this are refused (as `JSONDecoder` does at 512).
    static let maxDepth = 512

    struct Failure: Error, Hashable {
        /// The byte offset where the text stopped being JSON.
        var offset: Int
    }

    /// Parses `text` whole (whitespace around the value allowed).
    static func parse(_ text: String) throws(Failure) -> JSONValue {
        var text = text
        let result = text.withUTF8 { bytes -> Result<JSONValue, Failure> in
            var parser = JSONTextParser(bytes: bytes)
            do throws(Failure) {
                parser.skipWhitespace()
                let value = try parser.value(depth: 0)
                parser.skipWhitespace()
                guard parser.index == bytes.count else { return .failure(Failure(offset: parser.index)) }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private var failure: Failure { Failure(offset: index) }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek() == byte else { throw failure }
        index += 1
    }

    private mutating func literal(_ text: StaticString) throws(Failure) {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure }
        let start = text.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] { throw failure }
        index += count
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard let byte = peek() else { throw failure }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure
        }
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw failure }
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw failure }
            let name = try string()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            members[name] = try value(depth: depth)
            skipWhitespace()
            guard let next = peek() else { throw failure }
            index += 1
            if next == UInt8(ascii: "}") { return .object(members) }
            guard next == UInt8(ascii: ",") else {
                index -= 1
                throw failure
            }
        }
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw failure }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth))
            skipWhitespace()
            guard let next = peek() else { throw failure }
            index += 1
            if next == UInt8(ascii: "]") { return .array(elements) }
            guard next == UInt8(ascii: ",") else {
                index -= 1
                throw failure
            }
        }
    }

    /// A string from its opening quote; the text is valid UTF-8 (a Swift string), so only
    /// escapes and control characters need checking.
    private mutating func string() throws(Failure) -> String {
        index += 1
        let start = index
        // The common case: no escape, copied in one piece.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw failure }
            index += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                try escape(into: &out)
            case 0..<0x20:
                throw failure
            default:
                out.append(byte)
                index += 1
            }
        }
        throw failure
    }

    private mutating func escape(into out: inout [UInt8]) throws(Failure) {
        guard let byte = peek() else { throw failure }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4())
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate: its low one must follow.
                try literal("\\u")
                let low = UInt32(try hex4())
                guard (0xDC00..<0xE000).contains(low) else { throw failure }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw failure
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure }
            out.append(contentsOf: UTF8.encode(unicode)!)
        default:
            index -= 1
            throw failure
        }
    }

    private mutating func hex4() throws(Failure) -> UInt16 {
        guard index + 4 <= bytes.count else { throw failure }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private mutating func number() throws(Failure) -> JSONValue {
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let lead = peek(), isDigit(lead) else { throw failure }
        index += 1
        if lead != UInt8(ascii: "0") {
            while let byte = peek(), isDigit(byte) { index += 1 }
        }
        var integral = true
        if peek() == UInt8(ascii: ".") {
            integral = false
            index += 1
            try digits()
        }
        if let byte = peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            integral = false
            index += 1
            if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { index += 1 }
            try digits()
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else {
            index = start
            throw failure
        }
        return .number(double)
    }

    /// One or more digits.
    private mutating func digits() throws(Failure) {
        guard let first = peek(), isDigit(first) else { throw failure }
        while let byte = peek(), isDigit(byte) { index += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
