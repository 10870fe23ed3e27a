import Foundation
import LaminaNode
import LaminaProcess
import Testing

/// Issue 30: each setting is defined once (``NodeServerConfiguration/settings``) and read from
/// the config file, the environment and flags, each over the one before.
@Suite struct NodeSettingsTests {
    @Test func flagsOverTheEnvironmentOverTheFileOverTheDefaults() throws {
        let file = try Self.file(
            #"{"port": 1111, "maxSessions": 7, "limits": {"maxFrameSize": 65536, "idleTimeoutSeconds": 30}}"#)
        let environment = [
            "LAMINA_PORT": "2222", "LAMINA_LIMITS_MAX_FRAME_SIZE": "131072", "LAMINA_TEST_SOMETHING_ELSE": "x",
        ]
        let c = try NodeServerConfiguration.load(
            configFile: file, environment: environment, overrides: [("port", "3333")])
        #expect(c.port == 3333)  // flag over environment over file
        #expect(c.limits.maxFrameSize == 131_072)  // environment over file
        #expect(c.limits.idleTimeoutSeconds == 30)  // file over default
        #expect(c.maxSessions == 7)
        #expect(c.adminPort == NodeServerConfiguration().adminPort)  // default
    }

    @Test func everyKindOfValueReadsFromTextAsFromJSON() throws {
        let environment = [
            "LAMINA_SERVER_API_ENABLED": "false", "LAMINA_NODE_ID": "2a", "LAMINA_CONTENT_QUOTA_BYTES": "1048576",
            "LAMINA_RESOURCES_COMMANDS_PER_USER_PER_SECOND": "50.5", "LAMINA_PEERS_PEERS": "https://a:1, https://b:2",
            "LAMINA_STORE": "postgres://u@h/db",
        ]
        let c = try NodeServerConfiguration.load(environment: environment)
        #expect(c.serverAPI.enabled == false)
        #expect(c.nodeID == 42)
        #expect(c.content.quotaBytes == 1_048_576)
        #expect(c.resources.commandBudget.commandsPerSecond == 50.5)
        #expect(c.peers.peers == ["https://a:1", "https://b:2"])
        #expect(c.store == "postgres://u@h/db")

        let file = try Self.file(
            #"{"nodeID": "2b", "serverAPI": {"enabled": false}, "push": {"gateway": {"url": "https://g.example"}}, "store": null}"#
        )
        let f = try NodeServerConfiguration.load(configFile: file)
        #expect(f.nodeID == 43)
        #expect(f.serverAPI.enabled == false)
        #expect(f.push.gateway?.url == "https://g.example")
        #expect(f.store == nil)
    }

    @Test func anUnknownKeyOrABadValueIsAnErrorNamingIt() throws {
        #expect(
            Self.failure {
                try NodeServerConfiguration.load(configFile: try Self.file(#"{"limits": {"maxFrameSiz": 1}}"#))
            }?
            .contains("unknown key limits.maxFrameSiz") == true)
        #expect(
            Self.failure { try NodeServerConfiguration.load(configFile: try Self.file(#"{"prot": 1}"#)) }?.contains(
                "unknown key prot") == true)
        #expect(
            Self.failure { try NodeServerConfiguration.load(configFile: try Self.file(#"{"limits": 5}"#)) }?
                .contains("limits must be an object") == true)
        let badFile = Self.failure { try NodeServerConfiguration.load(configFile: try Self.file(#"{"port": "high"}"#)) }
        #expect(badFile?.contains("port must be an integer, not \"high\"") == true, "\(badFile ?? "")")
        let badVariable = Self.failure { try NodeServerConfiguration.load(environment: ["LAMINA_ADMIN_PORT": "off"]) }
        #expect(
            badVariable?.contains("LAMINA_ADMIN_PORT: adminPort must be an integer") == true, "\(badVariable ?? "")")
        #expect(
            Self.failure { try NodeServerConfiguration.load(overrides: [("nope.key", "1")]) }?.contains(
                "unknown setting nope.key") == true)
        #expect(
            Self.failure { try NodeServerConfiguration.load(environment: ["LAMINA_NODE_ID": "0"]) }?.contains(
                "nodeID must be a non-zero hexadecimal") == true)
        // In range but refused by validation, with the reason.
        #expect(
            Self.failure { try NodeServerConfiguration.load(overrides: [("port", "70000")]) }?.contains(
                "port must be 0...65535") == true)
    }

    @Test func eachSettingOnceWithItsVariableAndItsDefaultReadBack() throws {
        let keys = NodeServerConfiguration.settings.map(\.key)
        #expect(Set(keys).count == keys.count)
        #expect(
            NodeServerConfiguration.setting("limits.maxFrameSize")?.environmentVariable
                == "LAMINA_LIMITS_MAX_FRAME_SIZE")
        #expect(
            NodeServerConfiguration.setting("serverAPI.requestsPerSecond")?.environmentVariable
                == "LAMINA_SERVER_API_REQUESTS_PER_SECOND")
        #expect(NodeServerConfiguration.setting("nodeID")?.environmentVariable == "LAMINA_NODE_ID")
        // Every default, shown and read back as a flag would give it, leaves the defaults as they are.
        let defaults = NodeServerConfiguration()
        for setting in NodeServerConfiguration.settings {
            let shown = setting.value(in: defaults)
            guard shown != "(none)" else { continue }
            var c = defaults
            try c.apply(setting: setting.key, text: shown, from: "test")
            #expect(c == defaults, "\(setting.key) = \(shown)")
        }
    }

    /// Where the configuration files of these tests go (removed when the test process exits).
    static let directory = ScratchDirectory.make("lamina-settings")

    static func file(_ json: String) throws -> String {
        let url = directory.appendingPathComponent("\(UUID().uuidString).json")
        try Data(json.utf8).write(to: url)
        return url.path
    }

    static func failure(_ body: () throws -> NodeServerConfiguration) -> String? {
        do {
            _ = try body()
            return nil
        } catch { return "\(error)" }
    }
}
