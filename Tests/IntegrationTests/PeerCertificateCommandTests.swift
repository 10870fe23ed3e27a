import Foundation
import Testing

/// `lamina-node peer-certificate`: a node's peer certificate signed by the cluster CA (made on
/// request only), named for the node id in hex, valid for the given hosts.
@Suite struct PeerCertificateCommandTests {
    @Test func makesACertificateTheClusterCASignedForTheNodeAndRefusesWithoutACA() async throws {
        let directory = Fixtures.temporaryDirectory("peer-certificate")
        let folder = directory.appendingPathComponent("certificates").path

        // No CA yet and no --create-ca: refused, with what to do, and nothing made.
        let refused = try await Self.node(["peer-certificate", "--node-id", "2a", "--directory", folder])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("pass --create-ca"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/lamina-node-2a.pem"))

        let made = try await Self.node([
            "peer-certificate", "--node-id", "2a", "--directory", folder, "--create-ca", "--host", "10.0.0.7",
        ])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdout.contains("cluster CA:  \(folder)/cluster-ca.pem (created now"))
        #expect(
            made.stdout.contains(
                "serve flags: --node-id 2a --peer-ca \(folder)/cluster-ca.pem --peer-certificate \(folder)/lamina-node-2a.pem --peer-key \(folder)/lamina-node-2a-key.pem"
            ))

        // A second node's certificate from the same CA (not made again).
        let second = try await Self.node(["peer-certificate", "--node-id", "3", "--directory", folder])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!second.stdout.contains("cluster CA:"))

        for (node, host) in [("2a", "10.0.0.7"), ("3", "127.0.0.1")] {
            let certificate = "\(folder)/lamina-node-\(node).pem"
            let verified = try await ExternalCommand.run(
                "/usr/bin/openssl", ["verify", "-CAfile", "\(folder)/cluster-ca.pem", certificate])
            #expect(verified.status == 0 && verified.stdout.contains("OK"), "\(verified.stdout)\(verified.stderr)")
            let text = try await ExternalCommand.run(
                "/usr/bin/openssl", ["x509", "-in", certificate, "-noout", "-subject", "-ext", "subjectAltName"])
            #expect(
                text.stdout.contains("CN = lamina-node-\(node)") || text.stdout.contains("CN=lamina-node-\(node)"),
                "\(text.stdout)")
            #expect(text.stdout.contains("IP Address:\(host)"), "\(text.stdout)")
        }

        let bad = try await Self.node(["peer-certificate", "--node-id", "xyz", "--directory", folder])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("hexadecimal"), "\(bad.stderr)")
    }

    /// The built lamina-node run to its end.
    static func node(_ arguments: [String]) async throws -> ExternalCommand.Result {
        try await ExternalCommand.run(try BuiltProduct.url("lamina-node").path, arguments)
    }
}
