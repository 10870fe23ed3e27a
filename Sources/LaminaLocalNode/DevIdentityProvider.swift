import Foundation
import LaminaModel
import LaminaTransport

/// Dev identity provider (SPEC §5.2): an ES256 key in the node's data directory; mints
/// identity tokens (used by tests, by `lamina token`, and by the node's zero-config
/// bootstrap, which trusts its public key).
public struct DevIdentityProvider: Sendable {
    public static let providerID = "lamina-dev"
    /// The one JWS algorithm the provider signs with.
    public static let algorithm = "ES256"
    /// File names of the key pair inside the directory.
    public static let privateKeyFile = "dev-identity-key.pem"
    public static let publicKeyFile = "dev-identity-key.pub.pem"

    /// The public key (SubjectPublicKeyInfo PEM) a node verifies the tokens with.
    public let publicKeyPEM: String
    let signer: ES256Signer

    init(privateKeyPEM: String, publicKeyPEM: String) throws {
        self.publicKeyPEM = publicKeyPEM
        signer = try ES256Signer(privateKeyPEM: privateKeyPEM)
    }

    /// Loads the key pair from `directory`, creating the directory and a new P-256 key pair
    /// (private key readable by the owner only) when missing.
    public static func loadOrCreate(in directory: URL) throws -> DevIdentityProvider {
        let fm = FileManager.default
        let privateURL = directory.appendingPathComponent(privateKeyFile)
        let publicURL = directory.appendingPathComponent(publicKeyFile)
        if fm.fileExists(atPath: privateURL.path), fm.fileExists(atPath: publicURL.path) {
            return try DevIdentityProvider(
                privateKeyPEM: try String(contentsOf: privateURL, encoding: .utf8),
                publicKeyPEM: try String(contentsOf: publicURL, encoding: .utf8)
            )
        }
        try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        let pair = try ECKeyPair.generateP256()
        guard
            fm.createFile(
                atPath: privateURL.path, contents: Data(pair.privateKeyPEM.utf8), attributes: [.posixPermissions: 0o600]
            )
        else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: privateURL.path])
        }
        try Data(pair.publicKeyPEM.utf8).write(to: publicURL)
        return try DevIdentityProvider(privateKeyPEM: pair.privateKeyPEM, publicKeyPEM: pair.publicKeyPEM)
    }

    /// A signed identity token for `user`, bound to `nonce`, valid from now for `lifetime`.
    public func mintToken(user: UserID, nonce: String, displayName: String? = nil, lifetime: Duration = .seconds(600))
        throws -> String
    {
        let now = Date().timeIntervalSince1970.rounded(.down)
        var claims: [String: Any] = [
            "iss": Self.providerID, "prn": user.rawValue, "nce": nonce,
            "iat": Int64(now), "exp": Int64(now) + lifetime.components.seconds,
        ]
        if let displayName { claims["display_name"] = displayName }
        return try sign(header: Self.header, claims: claims)
    }

    static var header: [String: Any] { ["alg": algorithm, "typ": "JWT", "cty": "layer-eit;v=1", "kid": providerID] }

    /// A compact JWS of any header and claims (JSON objects) signed with this key (ES256).
    func sign(header: [String: Any], claims: [String: Any]) throws -> String {
        let h = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        let c = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Base64URL.encode([UInt8](h)) + "." + Base64URL.encode([UInt8](c))
        return input + "." + Base64URL.encode(try signer.sign(Array(input.utf8)))
    }
}
