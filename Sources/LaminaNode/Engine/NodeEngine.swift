import LaminaModel
import LaminaWire

/// The relay's brain: sessions, auth, commands, sync, fan-out. Thread-safe.
public final class NodeEngine: Sendable {
    public let store: NodeStore
    public let configuration: NodeEngineConfiguration

    public init(store: NodeStore, configuration: NodeEngineConfiguration) {
        self.store = store
        self.configuration = configuration
    }

    /// A new client session on a fresh sync stream.
    public func openSession(outbound: SessionOutbound) -> NodeSession {
        NodeSession(engine: self, outbound: outbound)
    }

    /// Stops taking commands, lets in-flight commits finish, closes sessions (GOAWAY is the server's).
    public func shutdown() async {}
}
