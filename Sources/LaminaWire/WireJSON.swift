/// A JSON value: the readable form of frames used by `Protocol/vectors` (SPEC §10) and by
/// tools that print frames. Serializes with sorted object keys, so output is deterministic.
public enum WireJSON: Hashable, Sendable, Codable {
    case null
    case bool(Bool)
    case number(Int64)
    case string(String)
    case array([WireJSON])
    case object([String: WireJSON])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Int64.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([WireJSON].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: WireJSON].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// `s` as a JSON string literal (quoted and escaped), for JSON written by hand.
    public static func quote(_ s: String) -> String {
        var out = ""
        writeString(s, into: &out)
        return out
    }

    /// The JSON text: two-space indentation, keys sorted by their UTF-8 bytes.
    public func serialized() -> String {
        var out = ""
        write(into: &out, indent: 0)
        return out
    }

    private func write(into out: inout String, indent: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += String(n)
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let a):
            if a.isEmpty {
                out += "[]"
                return
            }
            out += "[\n"
            for (i, v) in a.enumerated() {
                out += String(repeating: " ", count: indent + 2)
                v.write(into: &out, indent: indent + 2)
                out += i == a.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: " ", count: indent) + "]"
        case .object(let o):
            if o.isEmpty {
                out += "{}"
                return
            }
            out += "{\n"
            let keys = o.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (i, k) in keys.enumerated() {
                out += String(repeating: " ", count: indent + 2)
                Self.writeString(k, into: &out)
                out += ": "
                o[k]?.write(into: &out, indent: indent + 2)
                out += i == keys.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: " ", count: indent) + "}"
        }
    }

    private static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
