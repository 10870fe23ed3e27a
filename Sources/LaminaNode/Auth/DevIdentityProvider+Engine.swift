import LaminaLocalNode

extension DevIdentityProvider {
    /// The provider as the engine's configuration names it (ES256 only).
    public var provider: IdentityProvider {
        IdentityProvider(id: Self.providerID, publicKeyPEM: publicKeyPEM, algorithms: [Self.algorithm])
    }
}
