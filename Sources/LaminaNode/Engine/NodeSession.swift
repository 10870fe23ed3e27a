import LaminaModel
import LaminaWire

/// One client session. The server calls these in stream order from the stream's event loop.
public final class NodeSession: Sendable {
    let engine: NodeEngine
    let outbound: SessionOutbound

    init(engine: NodeEngine, outbound: SessionOutbound) {
        self.engine = engine
        self.outbound = outbound
    }

    /// Processes one decoded frame from the client.
    public func receive(_ frame: Frame) {
        outbound.close(with: ErrorFrame(WireError(.internalError, "the engine is not implemented yet")))
    }

    /// The decoder failed: the engine sends an error frame with the wire error's code and closes.
    public func receiveFailed(_ error: WireError) {
        outbound.close(with: ErrorFrame(error))
    }

    /// The transport went away (reset, connection closed, idle timeout).
    public func closed() {}
}
