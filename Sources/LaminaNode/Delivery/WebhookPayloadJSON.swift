import Foundation

/// Writes a webhook payload (`[String: Any]` of strings, integers, booleans, doubles, nulls,
/// arrays and objects, as the Server API representation builds it) as JSON: keys sorted,
/// slashes not escaped. It runs inside the command's commit, on the writer thread, where
/// `JSONSerialization` (casts of every value through `Any`) cost more than the rest of the
/// event. A value of any other type (an `NSNumber` from parsed JSON, say) is written by
/// `JSONSerialization` instead, so the result is always what it would accept.
enum WebhookPayloadJSON {
    static func data(_ object: [String: Any]) throws -> Data {
        var out: [UInt8] = []
        out.reserveCapacity(1_024)
        if write(object, to: &out) { return Data(out) }
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// Appends `value`; false when it holds a type this writer leaves to `JSONSerialization`.
    private static func write(_ value: Any, to out: inout [UInt8]) -> Bool {
        if let string = value as? String {
            write(string: string, to: &out)
            return true
        }
        // Exact types: on some platforms a number bridges to several of them.
        switch ObjectIdentifier(type(of: value)) {
        case ObjectIdentifier(Bool.self): out.append(contentsOf: ((value as! Bool) ? "true" : "false").utf8)
        case ObjectIdentifier(Int.self): out.append(contentsOf: String(value as! Int).utf8)
        case ObjectIdentifier(Int64.self): out.append(contentsOf: String(value as! Int64).utf8)
        case ObjectIdentifier(Int32.self): out.append(contentsOf: String(value as! Int32).utf8)
        case ObjectIdentifier(UInt64.self): out.append(contentsOf: String(value as! UInt64).utf8)
        case ObjectIdentifier(Double.self):
            let double = value as! Double
            guard double.isFinite else { return false }
            if double == double.rounded(), abs(double) < 1e15 { out.append(contentsOf: String(Int64(double)).utf8) } else {
                out.append(contentsOf: "\(double)".utf8)
            }
        case ObjectIdentifier(NSNull.self): out.append(contentsOf: "null".utf8)
        default:
            if let object = value as? [String: Any] {
                out.append(UInt8(ascii: "{"))
                for (i, key) in object.keys.sorted().enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    write(string: key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    guard write(object[key]!, to: &out) else { return false }
                }
                out.append(UInt8(ascii: "}"))
            } else if let array = value as? [Any] {
                out.append(UInt8(ascii: "["))
                for (i, element) in array.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    guard write(element, to: &out) else { return false }
                }
                out.append(UInt8(ascii: "]"))
            } else {
                return false
            }
        }
        return true
    }

    private static func write(string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
