import Foundation
import LaminaCLI
import LaminaNode
import LaminaProcess
import Testing

@Suite struct ConnectionSettingsTests {
    static func directory() -> URL {
        ScratchDirectory.make("lamina-cli-settings")
    }

    @Test func defaultsFollowTheZeroConfigNodeInTheCurrentDirectory() throws {
        let cwd = Self.directory()
        let cert = cwd.appendingPathComponent(".lamina").appendingPathComponent(NodeBootstrap.Files.certificate)
        try FileManager.default.createDirectory(at: cert.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: cert)
        let settings = try ConnectionSettings(
            user: "alice", node: nil, ca: nil, nodeData: nil, data: nil, currentDirectory: cwd)
        #expect(settings.nodeURL.absoluteString == "https://127.0.0.1:7443")
        #expect(settings.caFile.path == cert.standardizedFileURL.path)
        #expect(settings.nodeDataDirectory.path == cwd.appendingPathComponent(".lamina").standardizedFileURL.path)
        #expect(
            settings.clientDataDirectory.path == cwd.appendingPathComponent(".lamina-client").standardizedFileURL.path)
        #expect(settings.user == "alice")
    }

    @Test func aMissingCAFileABadUserAndABadURLAreClearErrors() {
        let cwd = Self.directory()
        let missing = #expect(throws: CLIError.self) {
            try ConnectionSettings(user: "alice", node: nil, ca: nil, nodeData: nil, data: nil, currentDirectory: cwd)
        }
        #expect(missing?.code == .caFileMissing)
        #expect(missing?.reason.contains("lamina-node") == true)
        let badUser = #expect(throws: CLIError.self) {
            try ConnectionSettings(user: "", node: nil, ca: nil, nodeData: nil, data: nil, currentDirectory: cwd)
        }
        #expect(badUser?.code == .invalidUserID)
        let badURL = #expect(throws: CLIError.self) {
            try ConnectionSettings(
                user: "alice", node: "http://127.0.0.1:7443", ca: nil, nodeData: nil, data: nil, currentDirectory: cwd)
        }
        #expect(badURL?.code == .invalidArgument)
    }

    @Test func noDevKeyIsAnErrorAndNoKeyIsCreated() {
        let dir = Self.directory()
        let error = #expect(throws: CLIError.self) { try DevTokens(nodeDataDirectory: dir) }
        #expect(error?.code == .devKeyMissing)
        #expect(
            !FileManager.default.fileExists(atPath: dir.appendingPathComponent(NodeBootstrap.Files.devIdentity).path))
    }
}
