/// JSON text (RFC 8259) written by hand, for the Client API WebSocket's packets: one byte
/// array, keys written in the order given (callers give them sorted, as `JSONEncoder` with
/// `.sortedKeys` writes them), strings escaped where RFC 8259 requires it (`"`, `\` and the
/// control characters below U+0020; `/` is not escaped). A packet costs one pass over its
/// bytes instead of an `Encoder`'s containers.
///
/// Commas are the writer's: ``open()``/``openArray()`` start a container, ``key(_:)`` and
/// ``element()`` separate its members, ``close()``/``closeArray()`` end it.
struct JSONText {
    private(set) var bytes: [UInt8] = []
    /// No member yet in the innermost open container.
    private var first = true

    init(capacity: Int = 1_024) { bytes.reserveCapacity(capacity) }

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        first = true
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        first = false
    }

    mutating func openArray() {
        bytes.append(UInt8(ascii: "["))
        first = true
    }

    mutating func closeArray() {
        bytes.append(UInt8(ascii: "]"))
        first = false
    }

    /// Starts the member `name` of an object (`name` needs no escaping: a key of ours).
    mutating func key(_ name: StaticString) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Starts the member named by any string (escaped).
    mutating func key(escaping name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Starts the next element of an array.
    mutating func element() {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
    }

    /// Bytes that are JSON text already.
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Bytes that are JSON text already (a value encoded before).
    mutating func raw(_ text: [UInt8]) {
        bytes.append(contentsOf: text)
    }

    mutating func null() { raw("null") }

    mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    mutating func integer(_ value: Int64) {
        if value >= 0 && value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
        } else {
            bytes.append(contentsOf: String(value).utf8)
        }
    }

    mutating func integer(_ value: Int) { integer(Int64(value)) }

    mutating func integer(_ value: UInt64) { bytes.append(contentsOf: String(value).utf8) }

    /// A finite double as Swift writes it (shortest round-trip form, valid JSON); a
    /// non-finite one, which JSON cannot hold, as null.
    mutating func number(_ value: Double) {
        guard value.isFinite else { return null() }
        bytes.append(contentsOf: value.description.utf8)
    }

    /// A string, quoted and escaped.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if start < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                start = index + 1
                escape(byte)
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    private mutating func escape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            bytes.append(Self.hex[Int(byte >> 4)])
            bytes.append(Self.hex[Int(byte & 0x0F)])
        }
    }

    /// `"name":value` for an optional string, nothing when nil (as `encodeIfPresent`).
    mutating func member(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// `"name":value` for an optional writable value, nothing when nil.
    mutating func member(_ name: StaticString, _ value: (some JSONTextWritable)?) {
        guard let value else { return }
        key(name)
        value.write(to: &self)
    }

    /// An object of strings, keys sorted.
    mutating func object(_ values: [String: String]) {
        open()
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            key(escaping: name)
            string(value)
        }
        close()
    }
}

/// A value that writes itself as JSON text, meaning what its `Encodable` form means (keys in
/// sorted order, nil optionals left out).
protocol JSONTextWritable {
    func write(to json: inout JSONText)
}

extension String: JSONTextWritable {
    func write(to json: inout JSONText) { json.string(self) }
}

extension Bool: JSONTextWritable {
    func write(to json: inout JSONText) { json.bool(self) }
}

extension Int: JSONTextWritable {
    func write(to json: inout JSONText) { json.integer(self) }
}

extension Int64: JSONTextWritable {
    func write(to json: inout JSONText) { json.integer(self) }
}

extension UInt64: JSONTextWritable {
    func write(to json: inout JSONText) { json.integer(self) }
}

extension Array: JSONTextWritable where Element: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.openArray()
        for element in self {
            json.element()
            element.write(to: &json)
        }
        json.closeArray()
    }
}

extension Dictionary: JSONTextWritable where Key == String, Value: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        for (name, value) in sorted(by: { $0.key < $1.key }) {
            json.key(escaping: name)
            value.write(to: &json)
        }
        json.close()
    }
}

extension JSONValue: JSONTextWritable {
    func write(to json: inout JSONText) {
        switch self {
        case .null: json.null()
        case .bool(let b): json.bool(b)
        case .integer(let n): json.integer(n)
        case .number(let d): json.number(d)
        case .string(let s): json.string(s)
        case .array(let a): a.write(to: &json)
        case .object(let o): o.write(to: &json)
        }
    }
}
