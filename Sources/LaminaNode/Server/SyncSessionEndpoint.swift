import LaminaWire

/// What the sync-stream bridge drives: one session's inbound side. ``NodeSession`` is the
/// real one; tests may plug in others. Called on the stream's event loop, in stream order.
public protocol SyncSessionEndpoint: AnyObject, Sendable {
    /// A decoded frame from the client.
    func receive(_ frame: Frame)
    /// The decoder failed; the endpoint sends the error frame and closes.
    func receiveFailed(_ error: WireError)
    /// The transport went away (reset, connection closed, idle timeout, slow consumer).
    func closed()
}

extension NodeSession: SyncSessionEndpoint {}
