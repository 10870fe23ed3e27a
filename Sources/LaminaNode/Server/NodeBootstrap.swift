import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaStore
import LaminaTransport

/// Zero-config start-up: makes the data directory and, on first run, a self-signed ECDSA
/// P-256 certificate, the dev identity provider's key and a node id; opens the store.
public struct NodeBootstrap: Sendable {
    /// What start-up found or created.
    public struct Prepared: Sendable {
        public var dataDirectory: URL
        public var certificatePath: String
        public var privateKeyPath: String
        /// Whether the certificate was created now (else found or configured).
        public var createdCertificate: Bool
        public var devIdentityProvider: DevIdentityProvider?
        public var devIdentityKeyDirectory: URL
        public var identityProviders: [IdentityProvider]
        public var nodeID: NodeID
        public var storePath: String
        /// Where the store lives: `storePath` (SQLite) unless the configuration names a PostgreSQL store.
        package var storeLocation: StoreLocation
    }

    /// File names inside the data directory (shared with the tools that read it).
    public typealias Files = LocalNode.Files

    /// Creates what is missing and reads what exists. Does not open the store.
    public static func prepare(_ configuration: NodeServerConfiguration) throws -> Prepared {
        try configuration.validate()
        let fm = FileManager.default
        let data = configuration.dataDirectoryURL
        do {
            try fm.createDirectory(at: data, withIntermediateDirectories: true)
            try fm.createDirectory(at: data.appendingPathComponent("tls"), withIntermediateDirectories: true)
        } catch {
            throw NodeServerError.startup("cannot create data directory \(data.path): \(error.localizedDescription)")
        }

        var certificatePath = data.appendingPathComponent(Files.certificate).path
        var privateKeyPath = data.appendingPathComponent(Files.privateKey).path
        var created = false
        if let cert = configuration.certificatePath, let key = configuration.privateKeyPath {
            certificatePath = cert
            privateKeyPath = key
            guard fm.fileExists(atPath: cert), fm.fileExists(atPath: key) else {
                throw NodeServerError.startup("certificate \(cert) or key \(key) does not exist")
            }
        } else if !fm.fileExists(atPath: certificatePath) || !fm.fileExists(atPath: privateKeyPath) {
            var hosts = ["localhost", "127.0.0.1", "::1"]
            if !hosts.contains(configuration.host), configuration.host != "0.0.0.0", configuration.host != "::" {
                hosts.append(configuration.host)
            }
            try DevelopmentCertificate.generate(
                commonName: "Lamina development node", hosts: hosts, validDays: 825,
                certificatePath: certificatePath, privateKeyPath: privateKeyPath)
            created = true
        }

        var providers: [IdentityProvider] = []
        let devDirectory =
            configuration.devIdentityDirectory.map { URL(fileURLWithPath: $0) }
            ?? data.appendingPathComponent(Files.devIdentity)
        var dev: DevIdentityProvider?
        if configuration.devIdentityProvider {
            try fm.createDirectory(at: devDirectory, withIntermediateDirectories: true)
            let provider = try DevIdentityProvider.loadOrCreate(in: devDirectory)
            dev = provider
            providers.append(provider.provider)
        }
        for file in configuration.identityProviders {
            let pem: String
            do { pem = try String(contentsOfFile: file.publicKeyPath, encoding: .utf8) } catch {
                throw NodeServerError.startup(
                    "cannot read the public key of provider \(file.id) at \(file.publicKeyPath)")
            }
            providers.append(IdentityProvider(id: file.id, publicKeyPEM: pem, algorithms: Set(file.algorithms)))
        }

        var storeLocation = StoreLocation.sqlite(path: data.appendingPathComponent(Files.store).path)
        if let store = configuration.store {
            do throws(StorageError) {
                storeLocation = try StoreLocation(parsing: store)
            } catch {
                throw NodeServerError.configuration("store: \(error.reason)")
            }
        }
        return Prepared(
            dataDirectory: data, certificatePath: certificatePath, privateKeyPath: privateKeyPath,
            createdCertificate: created, devIdentityProvider: dev, devIdentityKeyDirectory: devDirectory,
            identityProviders: providers,
            nodeID: try loadOrCreateNodeID(in: data, requested: configuration.nodeID.map(NodeID.init)),
            storePath: storeLocation.description, storeLocation: storeLocation)
    }

    /// A random non-zero node id, kept in `node-id` (hex) so it survives restarts.
    /// With `requested`, that id (written at first start; a data directory made for another id
    /// is refused, its store and replication log belong to that one).
    static func loadOrCreateNodeID(in directory: URL, requested: NodeID? = nil) throws -> NodeID {
        let url = directory.appendingPathComponent(Files.nodeID)
        if let text = try? String(contentsOf: url, encoding: .utf8) {
            guard let value = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16), value != 0 else {
                throw NodeServerError.startup("\(url.path) does not hold a node id (16 hex digits)")
            }
            if let requested, requested.rawValue != value {
                throw NodeServerError.startup(
                    "the data directory belongs to node \(String(value, radix: 16)), not \(String(requested.rawValue, radix: 16)) (\(url.path))"
                )
            }
            return NodeID(value)
        }
        let value = requested?.rawValue ?? UInt64.random(in: 1...UInt64.max)
        do {
            try Data(String(value, radix: 16).utf8).write(to: url, options: .atomic)
        } catch {
            throw NodeServerError.startup("cannot write \(url.path): \(error.localizedDescription)")
        }
        return NodeID(value)
    }
}
