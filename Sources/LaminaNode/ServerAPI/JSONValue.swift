import Foundation

/// A JSON value whose shape is open: a request body before it is checked field by field
/// (so each bad field gets its own `invalid_property` with Layer's wording), a webhook's
/// `config`, a Layer PATCH operation's `value`. Fixed shapes have their own `Codable`
/// types (ServerAPIObjects.swift); this replaces dictionaries of `Any` and their casts.
public enum JSONValue: Hashable, Sendable, Codable, ExpressibleByStringLiteral {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(stringLiteral value: String) { self = .string(value) }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Int64.self) {
            self = .integer(n)
        } else if let d = try? c.decode(Double.self) {
            self = .number(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .integer(let n): try c.encode(n)
        case .number(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public var isNull: Bool { self == .null }
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var object: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }

    /// The value as an integer when it is a number without a fractional part (`5.0` is 5).
    var exactInteger: Int64? {
        switch self {
        case .integer(let n): n
        case .number(let d): Int64(exactly: d)
        default: nil
        }
    }

    /// The value as the text `"\(v)"` gave for a parsed JSON scalar (push `data` values).
    var text: String {
        switch self {
        case .null: "<null>"
        case .bool(let b): b ? "1" : "0"
        case .integer(let n): String(n)
        case .number(let d): "\(d)"
        case .string(let s): s
        case .array, .object: (try? String(decoding: ServerAPIJSON.encode(self), as: UTF8.self)) ?? ""
        }
    }
}
