import Foundation
import LaminaClient
import LaminaLocalNode
import LaminaModel

/// What a connected command needs, from its options: the user, the node, the file to trust
/// it with, where the node's dev key is (to mint identity tokens) and where the client's
/// store lives. Defaults match a zero-config `lamina-node` started in the same directory.
public struct ConnectionSettings: Hashable, Sendable {
    public var user: UserID
    public var nodeURL: URL
    /// The CA file (the zero-config node's self-signed certificate) the client trusts.
    public var caFile: URL
    /// The node's data directory: its dev identity key signs this client's tokens.
    public var nodeDataDirectory: URL
    /// The client's data directory (one store per user inside).
    public var clientDataDirectory: URL

    /// The zero-config node's URL.
    public static var defaultNodeURL: String { LocalNode.defaultURL }

    /// The zero-config node's data directory (relative to the current directory).
    public static var defaultNodeDataDirectory: String { LocalNode.defaultDataDirectory }

    /// The client's default data directory (relative to the current directory).
    public static let defaultClientDataDirectory = "./.lamina-client"

    /// The certificate a zero-config node writes into `nodeDataDirectory`.
    public static func defaultCAFile(nodeDataDirectory: URL) -> URL {
        nodeDataDirectory.appendingPathComponent(LocalNode.Files.certificate)
    }

    /// Settings from command-line values (nil: the default). Relative paths are resolved
    /// against `currentDirectory`. Checks the user id, the URL's form and that the CA file
    /// exists; the dev key is checked when a token is first needed.
    public init(
        user: String, node: String?, ca: String?, nodeData: String?, data: String?,
        currentDirectory: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    ) throws(CLIError) {
        self.user = try UserList.user(user)
        let nodeText = node ?? Self.defaultNodeURL
        guard let url = URL(string: nodeText), url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty
        else {
            throw CLIError(.invalidArgument, "--node must be https://host:port, not '\(Sanitizer.clip(nodeText, 200))'")
        }
        nodeURL = url
        nodeDataDirectory = Self.resolve(nodeData ?? Self.defaultNodeDataDirectory, in: currentDirectory)
        clientDataDirectory = Self.resolve(data ?? Self.defaultClientDataDirectory, in: currentDirectory)
        caFile =
            ca.map { Self.resolve($0, in: currentDirectory) }
            ?? Self.defaultCAFile(nodeDataDirectory: nodeDataDirectory)
        guard FileManager.default.fileExists(atPath: caFile.path) else {
            let hint =
                ca == nil
                ? "the node writes it on first start: run `swift run lamina-node` in this directory, or pass --node-data DIR (or --ca FILE)"
                : "pass the certificate file the node printed (\"trust it: clients use ...\")"
            throw CLIError(.caFileMissing, "no CA file at \(caFile.path): \(hint)")
        }
    }

    /// The SDK's configuration for these settings.
    public var configuration: LaminaConfiguration {
        LaminaConfiguration(
            nodeURL: nodeURL, trust: .certificateAuthorities(caFile),
            dataDirectory: clientDataDirectory, agent: "lamina-cli/1")
    }

    /// `path` (`~` expanded) as an absolute file URL, relative paths against `directory`.
    public static func resolve(
        _ path: String, in directory: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    ) -> URL {
        let expanded = (path as NSString).expandingTildeInPath
        let url = expanded.hasPrefix("/") ? URL(fileURLWithPath: expanded) : directory.appendingPathComponent(expanded)
        return url.standardizedFileURL
    }
}
