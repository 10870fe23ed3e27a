import ArgumentParser
import Foundation
import LaminaModel
import LaminaNode

/// `lamina-node peer-certificate`: a node's peer certificate (CN `lamina-node-<id in hex>`)
/// signed by the cluster's CA, for nodes set up by hand (dev-cluster makes its own).
struct PeerCertificate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peer-certificate",
        abstract:
            "Make a node's peer certificate, signed by the cluster CA in --directory (--create-ca makes the CA first).",
        discussion: """
            Writes <directory>/lamina-node-<id>.pem and its key lamina-node-<id>-key.pem (kept if they exist), signed by \
            <directory>/cluster-ca.pem and cluster-ca-key.pem, and prints the serve flags that use them. A development CA: \
            a real cluster's CA key stays with its operator.
            """)

    @Option(help: "The node's id, in hexadecimal (1...ffffffffffffffff; the node's serve --node-id).")
    var nodeID: String
    @Option(help: "The folder of the cluster CA and the certificates.")
    var directory = "./cluster/certificates"
    @Flag(help: "Make the cluster CA in --directory when it has none (else a missing CA is an error).")
    var createCA = false
    @Option(
        name: .customLong("host"),
        help: "A host name or IP address the certificate is valid for (repeatable; default 127.0.0.1 and localhost).")
    var hosts: [String] = []

    func validate() throws {
        guard let id = UInt64(nodeID, radix: 16), id != 0 else {
            throw ValidationError(
                "--node-id must be a non-zero hexadecimal number (1...ffffffffffffffff), not \(nodeID)")
        }
    }

    func run() async throws {
        let node = NodeID(UInt64(nodeID, radix: 16)!)
        let folder = URL(fileURLWithPath: directory)
        let caPath = folder.appendingPathComponent(DevelopmentCluster.caFileName).path
        guard createCA || FileManager.default.fileExists(atPath: caPath) else {
            throw ValidationError(
                "no cluster CA at \(caPath): pass --create-ca to make one (once per cluster), or the --directory that holds it"
            )
        }
        let madeCA = !FileManager.default.fileExists(atPath: caPath)
        let ca = try DevelopmentCluster.certificateAuthority(in: folder)
        let files = try DevelopmentCluster.nodeCertificate(
            for: node, hosts: hosts.isEmpty ? ["127.0.0.1", "localhost"] : hosts, in: folder)
        // Paths as the user wrote the folder (relative stays relative).
        func shown(_ path: String) -> String {
            (directory.hasSuffix("/") ? directory : directory + "/") + URL(fileURLWithPath: path).lastPathComponent
        }
        let (certificate, key) = (shown(files.certificate), shown(files.key))
        if madeCA { print("cluster CA:  \(shown(ca.certificate)) (created now; its key \(shown(ca.key)))") }
        print(
            """
            node \(String(node.rawValue, radix: 16)):      \(certificate)
                         key \(key)
            serve flags: --node-id \(String(node.rawValue, radix: 16)) --peer-ca \(shown(ca.certificate)) --peer-certificate \(certificate) --peer-key \(key)
                         and, to serve clients with it too (they then trust the cluster CA): --certificate \(certificate) --key \(key)
            """)
    }
}
