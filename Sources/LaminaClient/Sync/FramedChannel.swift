import LaminaWire
import NIOCore

/// One sync stream as raw bytes, each direction a byte sequence in arbitrary chunks: the
/// HTTP/2 request body (written) and response body (read) of `POST /v1/sync` (SPEC §1).
public protocol SyncByteStream: Sendable {
    /// Writes bytes in order. Throws `.disconnected` once the stream is closed.
    func write(_ bytes: ByteBuffer) async throws(ClientError)
    /// The next chunk of the node's bytes (any split); nil at the end of the stream.
    func read() async throws(ClientError) -> ByteBuffer?
    /// Ends both directions. Idempotent.
    func close() async
}

/// A `FrameChannel` over a `SyncByteStream`: frames are encoded on the way out and decoded
/// incrementally on the way in with `FrameDecoder` (any chunking, limits checked on the
/// header). A frame the node sends that does not decode is answered with a fatal ERROR of
/// its code and the stream is closed (SPEC §8); `receive` then throws `.protocolError`.
public actor FramedChannel: FrameChannel {
    private let stream: any SyncByteStream
    private var decoder: FrameDecoder
    private var ended = false

    public init(_ stream: any SyncByteStream, limits: WireLimits = .default) {
        self.stream = stream
        self.decoder = FrameDecoder(limits: limits)
    }

    public func send(_ frame: Frame) async throws(ClientError) {
        try await stream.write(OutboxEncoder.encode(frame))
    }

    public func receive() async throws(ClientError) -> Frame? {
        while true {
            let next = Result { () throws(WireError) -> Frame? in try decoder.next() }
            switch next {
            case .success(let frame?): return frame
            case .success(nil): break
            case .failure(let error): throw await refuse(error)
            }
            if ended { return nil }
            guard let chunk = try await stream.read() else {
                ended = true
                let end = Result { () throws(WireError) in try decoder.finish() }
                if case .failure(let error) = end { throw await refuse(error) }
                return nil
            }
            decoder.feed(chunk)
        }
    }

    public func close() async {
        ended = true
        await stream.close()
    }

    /// SPEC §8: ERROR with the decoding code, fatal, no request id; then close.
    private func refuse(_ error: WireError) async -> ClientError {
        if let bytes = try? Frame.error(ErrorFrame(error)).encoded() {
            try? await stream.write(bytes)
        }
        await close()
        return ClientError(.protocolError, "the node sent bytes that do not decode: \(error)")
    }
}
