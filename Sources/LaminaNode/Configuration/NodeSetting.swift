/// One setting of ``NodeServerConfiguration``, defined once: its key (the config file's,
/// dotted for nested objects), the environment variable and `--set` key derived from it,
/// its doc, and where it lives in the configuration (whose initial value is its default).
public struct NodeSetting: @unchecked Sendable {
    /// The config file key, e.g. `limits.maxFrameSize` (`{"limits": {"maxFrameSize": …}}`).
    public let key: String
    /// What it does, for `lamina-node settings` and the flags' help.
    public let doc: String
    /// `LAMINA_` and the key in upper snake case: `LAMINA_LIMITS_MAX_FRAME_SIZE`.
    public let environmentVariable: String
    /// What a value must be ("an integer").
    public let kind: String
    /// Whether JSON `null` unsets it (an optional setting); for the others `null` is ignored.
    let nullable: Bool
    private let assign: (inout NodeServerConfiguration, ConfigValue) -> Bool
    private let read: (NodeServerConfiguration) -> String

    init<V: SettingValue>(_ key: String, _ path: WritableKeyPath<NodeServerConfiguration, V>, _ doc: String) {
        self.init(key, path, doc, parse: V.init(setting:), show: \.settingText, kind: V.settingKind)
    }

    /// A setting whose value is read and shown in a form of its own (`parse` nil: it does not fit).
    init<V>(
        _ key: String, _ path: WritableKeyPath<NodeServerConfiguration, V>, _ doc: String,
        parse: @escaping (ConfigValue) -> V?, show: @escaping (V) -> String, kind: String
    ) {
        self.key = key
        self.doc = doc
        self.kind = kind
        self.nullable = parse(.null) != nil
        self.environmentVariable = Self.environmentVariable(key)
        assign = { configuration, value in
            guard let v = parse(value) else { return false }
            configuration[keyPath: path] = v
            return true
        }
        read = { show($0[keyPath: path]) }
    }

    /// Sets it from `value`; a value that does not fit is an error naming the key and `source`.
    func apply(_ value: ConfigValue, to configuration: inout NodeServerConfiguration, from source: String) throws {
        // As an absent key did when the file was decoded into optionals.
        if value == .null, !nullable { return }
        guard assign(&configuration, value) else {
            throw NodeServerError.configuration("\(source): \(key) must be \(kind), not \(value.shown)")
        }
    }

    /// Its value in `configuration`, as text.
    public func value(in configuration: NodeServerConfiguration) -> String { read(configuration) }

    /// `limits.maxFrameSize` → `LAMINA_LIMITS_MAX_FRAME_SIZE`.
    static func environmentVariable(_ key: String) -> String {
        var name = "LAMINA_"
        var previous: Character = "."
        for c in key {
            if c == "." {
                name += "_"
            } else {
                if c.isUppercase, previous.isLowercase || previous.isNumber { name += "_" }
                name += c.uppercased()
            }
            previous = c
        }
        return name
    }
}
