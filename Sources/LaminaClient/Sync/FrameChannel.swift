import LaminaWire

/// One sync stream to the node (SPEC §1), as decoded frames: the sync engine's only view
/// of the network. The network integration provides one over `POST /v1/sync` (TLS +
/// HTTP/2, `LaminaTransport`); tests provide an in-memory node.
public protocol FrameChannel: Sendable {
    /// Sends one frame. Throws `.disconnected` once the channel is closed.
    func send(_ frame: Frame) async throws(ClientError)
    /// The next frame from the node; nil once the stream has ended.
    func receive() async throws(ClientError) -> Frame?
    /// Closes the stream (both directions). Idempotent.
    func close() async
}

/// Opens a new channel to the node (one stream, one session).
public typealias FrameChannelConnector = @Sendable () async throws(ClientError) -> any FrameChannel

/// Asks the app's backend for an identity token signed over `nonce` (SPEC §5.2): the
/// docs' authentication challenge. Called on first authentication and whenever the node
/// ends or refuses the session.
public typealias IdentityTokenProvider = @Sendable (_ nonce: String) async throws -> String
