import Foundation

/// A setting's value as a source gave it: a JSON value from the config file, or text from
/// the environment or a flag (which each setting's type parses).
enum ConfigValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case double(Double)
    case string(String)
    case array([ConfigValue])
    case object([String: ConfigValue])
    /// From the environment or a flag.
    case text(String)

    init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let v = try? c.decode(Bool.self) {
            self = .bool(v)
        } else if let v = try? c.decode(Int64.self) {
            self = .integer(v)
        } else if let v = try? c.decode(UInt64.self) {
            self = .unsigned(v)
        } else if let v = try? c.decode(Double.self) {
            self = .double(v)
        } else if let v = try? c.decode(String.self) {
            self = .string(v)
        } else if let v = try? c.decode([ConfigValue].self) {
            self = .array(v)
        } else {
            self = .object(try c.decode([String: ConfigValue].self))
        }
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let v): try c.encode(v)
        case .integer(let v): try c.encode(v)
        case .unsigned(let v): try c.encode(v)
        case .double(let v): try c.encode(v)
        case .string(let v), .text(let v): try c.encode(v)
        case .array(let v): try c.encode(v)
        case .object(let v): try c.encode(v)
        }
    }

    /// How an error message shows it.
    var shown: String {
        switch self {
        case .text(let v), .string(let v): "\"\(v)\""
        case .null: "null"
        case .bool(let v): "\(v)"
        case .integer(let v): "\(v)"
        case .unsigned(let v): "\(v)"
        case .double(let v): "\(v)"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
