import Foundation
import LaminaModel
import LaminaTransport

/// A development cluster's certificates: a CA and, per node, a peer certificate it signed
/// (CN `lamina-node-<id>`, valid for the given hosts), for tests and local clusters. Not for
/// production: a real cluster's CA key stays with its operator.
public enum DevelopmentCluster {
    /// Where one node's peer certificate and key are.
    public struct NodeFiles: Sendable, Hashable {
        public var certificate: String
        public var key: String
    }

    /// The CA's certificate and key file names in a cluster's certificate folder.
    public static let caFileName = "cluster-ca.pem"
    public static let caKeyFileName = "cluster-ca-key.pem"

    /// The CA's files in `directory` (made when missing).
    public static func certificateAuthority(in directory: URL) throws -> NodeFiles {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let files = NodeFiles(
            certificate: directory.appendingPathComponent(caFileName).path,
            key: directory.appendingPathComponent(caKeyFileName).path)
        if !FileManager.default.fileExists(atPath: files.certificate) {
            try DevelopmentCertificate.generate(
                commonName: "lamina development cluster CA", hosts: [], validDays: 365,
                certificatePath: files.certificate, privateKeyPath: files.key)
        }
        return files
    }

    /// A peer certificate for `node`, signed by the CA in `directory` (made when missing).
    public static func nodeCertificate(
        for node: NodeID, hosts: [String] = ["127.0.0.1", "localhost"], in directory: URL
    ) throws -> NodeFiles {
        let ca = try certificateAuthority(in: directory)
        let name = PeerSettings.commonName(of: node)
        let files = NodeFiles(
            certificate: directory.appendingPathComponent("\(name).pem").path,
            key: directory.appendingPathComponent("\(name)-key.pem").path)
        if !FileManager.default.fileExists(atPath: files.certificate) {
            try DevelopmentCertificate.generate(
                commonName: name, hosts: hosts, validDays: 365, certificatePath: files.certificate,
                privateKeyPath: files.key,
                issuer: (ca.certificate, ca.key))
        }
        return files
    }

    /// Peer settings for `node` in the development cluster of `directory`, listening on
    /// `host:port` and dialing `peers`.
    public static func settings(
        for node: NodeID, host: String = "127.0.0.1", port: Int, peers: [String],
        cluster: String = PeerSettings().cluster,
        in directory: URL
    ) throws -> PeerSettings {
        let files = try nodeCertificate(for: node, hosts: [host, "localhost"], in: directory)
        var settings = PeerSettings()
        settings.host = host
        settings.port = port
        settings.cluster = cluster
        settings.peers = peers
        settings.caFile = try certificateAuthority(in: directory).certificate
        settings.certificateFile = files.certificate
        settings.keyFile = files.key
        return settings
    }
}
