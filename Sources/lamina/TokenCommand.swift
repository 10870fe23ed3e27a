import ArgumentParser
import Foundation
import LaminaCLI

/// `lamina token`: a dev identity token signed with a local node's dev provider key.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a dev identity token for a user, signed with the node's dev identity key.",
        discussion: """
            A node accepts a nonce only on the connection that asked for it, once (SPEC §5.2): to log a client in, pass \
            the nonce that client's connection got (--nonce). Without --nonce, asks the node (--node, --ca) for a nonce \
            on a connection of its own and prints it on standard error; that token shows the form, it logs nobody in.
            """)

    @Option(help: "The user id (the token's prn).")
    var user: String

    @Option(help: "The nonce the node issued (a NONCE frame); default: ask the node for one.")
    var nonce: String?

    @Option(help: "The node's URL, to ask for a nonce (default \(ConnectionSettings.defaultNodeURL)).")
    var node: String?

    @Option(help: "The CA file to trust the node with, to ask for a nonce (default: tls/node-cert.pem in --node-data).")
    var ca: String?

    @Option(
        name: .customLong("node-data"),
        help:
            "The node's data directory, holding its dev identity key (default \(ConnectionSettings.defaultNodeDataDirectory))."
    )
    var nodeData: String?

    func run() async throws {
        try await reportingErrors {
            let user = try UserList.user(user)
            let nodeData = ConnectionSettings.resolve(nodeData ?? ConnectionSettings.defaultNodeDataDirectory)
            let tokens = try DevTokens(nodeDataDirectory: nodeData)
            let nonce: String
            if let given = self.nonce {
                nonce = given
            } else {
                let settings = try ConnectionSettings(
                    user: user.rawValue, node: node, ca: ca, nodeData: nodeData.path, data: nil)
                let issued = try await NonceRequester.nonce(settings: settings)
                Console.err("nonce: \(issued.nonce) (from \(settings.nodeURL.absoluteString))")
                nonce = issued.nonce
            }
            Console.out(try tokens.token(user: user, nonce: nonce))
        }
    }
}
