import Foundation

/// A type a setting can hold: read from a config file's JSON value, or from the text of an
/// environment variable or a flag; nil when the value does not fit (the caller names the key).
protocol SettingValue {
    init?(setting value: ConfigValue)
    /// What the value reads as in a listing of the defaults.
    var settingText: String { get }
    /// What a value must be, for an error message ("an integer").
    static var settingKind: String { get }
}

extension Int: SettingValue {
    init?(setting value: ConfigValue) {
        switch value {
        case .integer(let v): self.init(exactly: v)
        case .text(let t): self.init(t.trimmingCharacters(in: .whitespaces))
        default: return nil
        }
    }
    var settingText: String { "\(self)" }
    static var settingKind: String { "an integer" }
}

extension UInt32: SettingValue {
    init?(setting value: ConfigValue) {
        guard let v = Int(setting: value) else { return nil }
        self.init(exactly: v)
    }
    var settingText: String { "\(self)" }
    static var settingKind: String { "an integer 0...4294967295" }
}

extension UInt64: SettingValue {
    init?(setting value: ConfigValue) {
        switch value {
        case .integer(let v): self.init(exactly: v)
        case .unsigned(let v): self = v
        case .text(let t): self.init(t.trimmingCharacters(in: .whitespaces))
        default: return nil
        }
    }
    var settingText: String { "\(self)" }
    static var settingKind: String { "an integer 0...18446744073709551615" }
}

extension Double: SettingValue {
    init?(setting value: ConfigValue) {
        switch value {
        case .integer(let v): self.init(v)
        case .unsigned(let v): self.init(v)
        case .double(let v): self = v
        case .text(let t):
            guard let v = Double(t.trimmingCharacters(in: .whitespaces)), v.isFinite else { return nil }
            self = v
        default: return nil
        }
    }
    var settingText: String { "\(self)" }
    static var settingKind: String { "a number" }
}

extension Bool: SettingValue {
    init?(setting value: ConfigValue) {
        switch value {
        case .bool(let v): self = v
        case .text(let t):
            switch t.lowercased() {
            case "true", "1", "yes": self = true
            case "false", "0", "no": self = false
            default: return nil
            }
        default: return nil
        }
    }
    var settingText: String { "\(self)" }
    static var settingKind: String { "true or false" }
}

extension String: SettingValue {
    init?(setting value: ConfigValue) {
        switch value {
        case .string(let v), .text(let v): self = v
        default: return nil
        }
    }
    var settingText: String { self }
    static var settingKind: String { "a string" }
}

extension Optional: SettingValue where Wrapped: SettingValue {
    /// JSON `null` (or empty text) unsets it.
    init?(setting value: ConfigValue) {
        switch value {
        case .null, .text(""): self = .none
        default:
            guard let v = Wrapped(setting: value) else { return nil }
            self = .some(v)
        }
    }
    var settingText: String { map(\.settingText) ?? "(none)" }
    static var settingKind: String { "\(Wrapped.settingKind) or null" }
}

/// A setting whose value is a JSON array or object (in the environment or a flag: its JSON
/// text; a list of strings may also be given comma-separated).
protocol JSONSettingValue: SettingValue, Decodable {}

extension JSONSettingValue {
    init?(setting value: ConfigValue) {
        let data: Data
        switch value {
        case .text(let t):
            if Self.self == [String].self, !t.hasPrefix("[") {
                self = t.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } as! Self
                return
            }
            data = Data(t.utf8)
        default:
            guard let encoded = try? JSONEncoder().encode(value) else { return nil }
            data = encoded
        }
        guard let decoded = try? JSONDecoder().decode(Self.self, from: data) else { return nil }
        self = decoded
    }
    var settingText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let encodable = self as? any Encodable, let data = try? encoder.encode(encodable) else { return "(set)" }
        return String(decoding: data, as: UTF8.self)
    }
    static var settingKind: String { "JSON of the documented shape" }
}

extension Array: SettingValue, JSONSettingValue where Element: Codable {}
extension PushSettings.APNs: JSONSettingValue {}
extension PushSettings.FCM: JSONSettingValue {}
extension PushSettings.Gateway: JSONSettingValue {}
