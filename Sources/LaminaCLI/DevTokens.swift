import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaWire

/// Mints development identity tokens with a local node's dev identity provider key
/// (`LaminaLocalNode`'s `DevIdentityProvider`; no signing code here, no node linked).
public struct DevTokens: Sendable {
    public let provider: DevIdentityProvider

    /// Loads the key from `nodeDataDirectory`. Never creates one: a key the node does not
    /// have would mint tokens the node refuses.
    public init(nodeDataDirectory: URL) throws(CLIError) {
        let directory = nodeDataDirectory.appendingPathComponent(LocalNode.Files.devIdentity)
        let key = directory.appendingPathComponent(DevIdentityProvider.privateKeyFile)
        guard FileManager.default.fileExists(atPath: key.path) else {
            throw CLIError(
                .devKeyMissing,
                "no dev identity key at \(key.path): start the node once (`swift run lamina-node`) or pass --node-data DIR (the node's data directory)"
            )
        }
        do { provider = try DevIdentityProvider.loadOrCreate(in: directory) } catch {
            throw CLIError(.devKeyMissing, "the dev identity key in \(directory.path) does not load: \(error)")
        }
    }

    /// A token for `user` bound to `nonce`.
    public func token(user: UserID, nonce: String) throws(CLIError) -> String {
        guard !nonce.isEmpty, nonce.utf8.count <= Self.maxNonceBytes else {
            throw CLIError(.invalidArgument, "a nonce is 1...\(Self.maxNonceBytes) UTF-8 bytes")
        }
        do { return try provider.mintToken(user: user, nonce: nonce) } catch {
            throw CLIError(.invalidArgument, "cannot sign a token: \(error)")
        }
    }

    /// The longest nonce accepted: the NONCE frame's (SPEC §5.2).
    public static let maxNonceBytes = WireLimits.default.maxTokenBytes
}
