import Foundation

/// Where a node's settings come from, each later one over the earlier: the defaults, the
/// config file (JSON, keys as in ``NodeServerConfiguration/settings``, nested objects for the
/// dotted ones), the environment (`LAMINA_…`), then flags (`--set key=value`, then the named
/// flags). An unknown key or a value that does not fit is an error naming it.
extension NodeServerConfiguration {
    /// The defaults, then each source in order; validated.
    public static func load(
        configFile: String? = nil, environment: [String: String] = [:], overrides: [(key: String, value: String)] = []
    ) throws -> NodeServerConfiguration {
        var configuration = NodeServerConfiguration()
        if let configFile { try configuration.apply(configFile: configFile) }
        try configuration.apply(environment: environment)
        for (key, value) in overrides { try configuration.apply(setting: key, text: value, from: "--set") }
        try configuration.validate()
        return configuration
    }

    /// Applies a JSON config file: every key optional.
    public mutating func apply(configFile path: String) throws {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw NodeServerError.configuration("cannot read config file \(path): \(error.localizedDescription)")
        }
        let file: [String: ConfigValue]
        do { file = try JSONDecoder().decode([String: ConfigValue].self, from: data) } catch {
            throw NodeServerError.configuration("config file \(path) is not valid: \(error)")
        }
        try apply(object: file, prefix: "", from: "config file \(path)")
        try validate()
    }

    /// Applies the `LAMINA_…` variables of ``settings`` found in `environment` (others are ignored).
    public mutating func apply(environment: [String: String]) throws {
        for setting in Self.settings {
            guard let text = environment[setting.environmentVariable] else { continue }
            try setting.apply(.text(text), to: &self, from: setting.environmentVariable)
        }
    }

    /// Applies one setting given as text (a flag or a variable).
    public mutating func apply(setting key: String, text: String, from source: String) throws {
        guard let setting = Self.setting(key) else {
            throw NodeServerError.configuration("\(source): unknown setting \(key)")
        }
        try setting.apply(.text(text), to: &self, from: source)
    }

    private mutating func apply(object: [String: ConfigValue], prefix: String, from source: String) throws {
        for (name, value) in object.sorted(by: { $0.key < $1.key }) {
            let key = prefix.isEmpty ? name : "\(prefix).\(name)"
            if let setting = Self.setting(key) {
                try setting.apply(value, to: &self, from: source)
            } else if prefix.isEmpty, Self.settingGroups.contains(key) {
                switch value {
                case .null: continue
                case .object(let inner): try apply(object: inner, prefix: key, from: source)
                default: throw NodeServerError.configuration("\(source): \(key) must be an object, not \(value.shown)")
                }
            } else {
                throw NodeServerError.configuration("\(source): unknown key \(key)")
            }
        }
    }
}
