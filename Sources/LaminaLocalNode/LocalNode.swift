import Foundation

/// What tools on the same machine share with a zero-config node (`lamina-node` with no
/// options): where it listens and what its data directory holds. The node's configuration
/// takes its defaults from here; the `lamina` CLI finds the node, its certificate and its
/// dev identity key with them, without linking the node.
public enum LocalNode {
    /// The sync listener's default host and port.
    public static let defaultHost = "127.0.0.1"
    public static let defaultPort = 7443
    /// The default data directory (relative to the current directory).
    public static let defaultDataDirectory = "./.lamina"

    /// The zero-config node's URL.
    public static var defaultURL: String { "https://\(defaultHost):\(defaultPort)" }

    /// File names inside the data directory.
    public enum Files {
        public static let certificate = "tls/node-cert.pem"
        public static let privateKey = "tls/node-key.pem"
        public static let store = "node.sqlite"
        public static let nodeID = "node-id"
        /// The directory of the dev identity key pair (``DevIdentityProvider``).
        public static let devIdentity = "dev-identity"
    }
}
