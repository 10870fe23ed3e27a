import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode

/// Where the nodes of `lamina-node dev-cluster` listen and keep their files: node i (1...N)
/// has node id i and listens on 127.0.0.1, ports `base + 10·(i−1)` (sync), `+1` (admin) and
/// `+2` (peers); its data directory is `<directory>/node-<i>`, the cluster's certificates are
/// in `<directory>/certificates`.
struct ClusterLayout {
    /// How many nodes a development cluster has (`--nodes`).
    static let nodeCounts = 2...9
    /// The first node's sync port by default: clear of a lone node's 7443/7444.
    static let defaultBasePort = 7450
    /// Ports between one node's sync port and the next node's.
    static let portStride = 10
    static let host = "127.0.0.1"

    var nodes: Int
    var basePort: Int
    /// The cluster's folder as the user wrote it (printed commands stay relative when it is).
    var directory: String

    /// The base ports `--nodes` nodes can use: unprivileged, the last peer port at most 65535.
    static func basePorts(nodes: Int) -> ClosedRange<Int> { 1024...(65535 - portStride * (nodes - 1) - 2) }

    struct Node {
        var index: Int
        var id: NodeID
        var syncPort: Int
        var adminPort: Int
        var peerPort: Int
        var dataDirectory: String

        var syncURL: String { "https://\(ClusterLayout.host):\(syncPort)" }
        var adminURL: String { "http://\(ClusterLayout.host):\(adminPort)" }
        var peerURL: String { "https://\(ClusterLayout.host):\(peerPort)" }
        var name: String { "node-\(index)" }
    }

    func node(_ index: Int) -> Node {
        let sync = basePort + Self.portStride * (index - 1)
        return Node(
            index: index, id: NodeID(UInt64(index)), syncPort: sync, adminPort: sync + 1, peerPort: sync + 2,
            dataDirectory: Self.join(directory, "node-\(index)"))
    }

    var all: [Node] { (1...nodes).map(node) }
    var certificates: String { Self.join(directory, "certificates") }
    /// The cluster CA, which clients trust: every node serves clients with its peer certificate.
    var caFile: String { Self.join(certificates, DevelopmentCluster.caFileName) }
    /// A file of the certificates folder, by the folder's path as the user wrote it.
    func certificateFile(_ path: String) -> String {
        Self.join(certificates, URL(fileURLWithPath: path).lastPathComponent)
    }
    /// The dev identity key every node of the cluster shares (`serve --dev-identity`): a
    /// client's `--node-data <directory>` finds it in any node's hint.
    var devIdentity: String { Self.join(directory, LocalNode.Files.devIdentity) }

    /// Users of the chat hints, one per node.
    static let users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"]

    /// The user of node `index`'s chat hint and the one it talks to (the next node's).
    func chatUsers(_ index: Int) -> (user: String, with: String) {
        (Self.users[(index - 1) % Self.users.count], Self.users[index % nodes % Self.users.count])
    }

    /// `lamina-node serve` arguments for node `index`: its listeners, its id, the cluster CA,
    /// its peer certificate, and every other node as a peer to dial.
    func serveArguments(_ index: Int, cluster: String, certificate: String, key: String, ca: String, logLevel: String)
        -> [String]
    {
        let me = node(index)
        var arguments = [
            "serve", "--data-dir", me.dataDirectory,
            "--listen", "\(Self.host):\(me.syncPort)", "--admin", "\(Self.host):\(me.adminPort)",
            "--node-id", String(me.id.rawValue, radix: 16), "--peer-listen", "\(Self.host):\(me.peerPort)", "--cluster",
            cluster,
            "--peer-ca", ca, "--peer-certificate", certificate, "--peer-key", key,
            "--certificate", certificate, "--key", key, "--dev-identity", devIdentity, "--log-level", logLevel,
        ]
        for other in all where other.index != index { arguments += ["--peer", other.peerURL] }
        return arguments
    }

    /// `words` as one line a POSIX shell runs as they are (quoted where needed).
    static func shellCommand(_ words: [String]) -> String {
        words.map { word in
            let plain = !word.isEmpty && word.allSatisfy { $0.isLetter || $0.isNumber || "-_./:=@,+".contains($0) }
            return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
