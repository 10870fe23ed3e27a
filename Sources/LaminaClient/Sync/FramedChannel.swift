import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// One sync stream as raw bytes, each direction a byte sequence in arbitrary chunks: the
/// HTTP/2 request body (written) and response body (read) of `POST /v1/sync` (SPEC §1).
/// Like `FrameChannel`, its requirements run on the caller's executor.
public protocol SyncByteStream: Sendable {
    /// Writes bytes in order. Throws `.disconnected` once the stream is closed.
    nonisolated(nonsending) func write(_ bytes: ByteBuffer) async throws(ClientError)
    /// The next chunk of the node's bytes (any split); nil at the end of the stream.
    nonisolated(nonsending) func read() async throws(ClientError) -> ByteBuffer?
    /// Ends both directions. Idempotent.
    nonisolated(nonsending) func close() async
}

/// A `FrameChannel` over a `SyncByteStream`: frames are encoded on the way out and decoded
/// incrementally on the way in with `FrameDecoder` (any chunking, limits checked on the
/// header). A frame the node sends that does not decode is answered with a fatal ERROR of
/// its code and the stream is closed (SPEC §8); `receive` then throws `.protocolError`.
///
/// Not an executor of its own: it runs in the session that calls it (one reader at a time;
/// the lock only makes the decoder's state safe to share, and is never held across a wait).
public final class FramedChannel: FrameChannel {
    private let stream: any SyncByteStream
    private struct Inbound: Sendable {
        var decoder: FrameDecoder
        var ended = false
    }
    private let inbound: NIOLockedValueBox<Inbound>

    public init(_ stream: any SyncByteStream, limits: WireLimits = .default) {
        self.stream = stream
        self.inbound = NIOLockedValueBox(Inbound(decoder: FrameDecoder(limits: limits)))
    }

    public nonisolated(nonsending) func send(_ frame: Frame) async throws(ClientError) {
        try await stream.write(OutboxEncoder.encode(frame))
    }

    public nonisolated(nonsending) func send(encoded bytes: ByteBuffer) async throws(ClientError) {
        try await stream.write(bytes)
    }

    public nonisolated(nonsending) func receive() async throws(ClientError) -> Frame? {
        while true {
            let next = inbound.withLockedValue { state -> (Result<Frame?, WireError>, ended: Bool) in
                (Result { () throws(WireError) -> Frame? in try state.decoder.next() }, state.ended)
            }
            switch next.0 {
            case .success(let frame?): return frame
            case .success(nil): break
            case .failure(let error): throw await refuse(error)
            }
            if next.ended { return nil }
            guard let chunk = try await stream.read() else {
                let end = inbound.withLockedValue { state in
                    state.ended = true
                    return Result { () throws(WireError) in try state.decoder.finish() }
                }
                if case .failure(let error) = end { throw await refuse(error) }
                return nil
            }
            inbound.withLockedValue { $0.decoder.feed(chunk) }
        }
    }

    public nonisolated(nonsending) func close() async {
        inbound.withLockedValue { $0.ended = true }
        await stream.close()
    }

    /// SPEC §8: ERROR with the decoding code, fatal, no request id; then close.
    private nonisolated(nonsending) func refuse(_ error: WireError) async -> ClientError {
        if let bytes = try? Frame.error(ErrorFrame(error)).encoded() {
            try? await stream.write(bytes)
        }
        await close()
        return ClientError(.protocolError, "the node sent bytes that do not decode: \(error)")
    }
}
