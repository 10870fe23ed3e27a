import LaminaWire
import NIOCore

/// One sync stream to the node (SPEC §1), as decoded frames: the sync engine's only view
/// of the network. The network integration provides one over `POST /v1/sync` (TLS +
/// HTTP/2, `LaminaTransport`); tests provide an in-memory node.
///
/// The requirements run on their caller's executor (`nonisolated(nonsending)`): the session
/// calls them from its own isolation, so a frame goes from the session to the transport's
/// event loop without passing through another executor on the way.
public protocol FrameChannel: Sendable {
    /// Sends one frame. Throws `.disconnected` once the channel is closed.
    nonisolated(nonsending) func send(_ frame: Frame) async throws(ClientError)
    /// Sends one frame already encoded by `Frame.encoded()` (an outbox entry's stored bytes,
    /// SPEC §7: a retry sends the very same bytes). The default decodes it and calls `send`;
    /// a channel over bytes writes them as they are.
    nonisolated(nonsending) func send(encoded bytes: ByteBuffer) async throws(ClientError)
    /// The next frame from the node; nil once the stream has ended.
    nonisolated(nonsending) func receive() async throws(ClientError) -> Frame?
    /// Closes the stream (both directions). Idempotent.
    nonisolated(nonsending) func close() async
}

extension FrameChannel {
    public nonisolated(nonsending) func send(encoded bytes: ByteBuffer) async throws(ClientError) {
        let frame: Frame
        do { frame = try Frame.decode(exactly: bytes) } catch { throw ClientError(wire: error) }
        try await send(frame)
    }
}

/// Opens a new channel to the node (one stream, one session).
public typealias FrameChannelConnector = @Sendable () async throws(ClientError) -> any FrameChannel

/// Asks the app's backend for an identity token signed over `nonce` (SPEC §5.2): the
/// docs' authentication challenge. Called on first authentication and whenever the node
/// ends or refuses the session.
public typealias IdentityTokenProvider = @Sendable (_ nonce: String) async throws -> String
