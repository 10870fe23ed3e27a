import Foundation
import LaminaModel

/// Dev identity provider: an ES256 key in the data directory; mints identity tokens
/// (used by tests, by `lamina token`, and by the server's zero-config bootstrap).
public struct DevIdentityProvider: Sendable {
    public static let providerID = "lamina-dev"
    /// The provider as the engine's configuration names it.
    public var provider: IdentityProvider
    let privateKeyPEM: String

    /// Loads the key pair from `directory`, creating it when missing.
    public static func loadOrCreate(in directory: URL) throws -> DevIdentityProvider {
        throw CocoaError(.featureUnsupported)
    }

    /// A signed identity token for `user`, bound to `nonce`.
    public func mintToken(user: UserID, nonce: String, displayName: String? = nil, lifetime: Duration = .seconds(600)) throws -> String {
        throw CocoaError(.featureUnsupported)
    }
}
