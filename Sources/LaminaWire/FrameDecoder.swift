import NIOCore

/// An incremental frame decoder for one byte stream (SPEC §2, §8). Accepts bytes in any
/// split (e.g. HTTP/2 DATA chunks): `feed` appends them, `next` returns the next whole frame
/// or nil when it needs more bytes. Every limit that the header reveals is checked as soon
/// as the 8 header bytes are in, before any payload is buffered; nothing is allocated from
/// a length read off the wire. Frames of unknown types marked skippable are discarded as
/// their bytes pass. After an error the decoder stays failed and rethrows that error.
public struct FrameDecoder: Sendable {
    private enum State {
        /// Waiting for a header.
        case header
        /// The header is checked and consumed; waiting for `length` payload bytes.
        case payload(FrameType, length: Int)
        /// Discarding the payload of a skippable frame.
        case skipping(remaining: Int)
        case failed(WireError)
    }

    public private(set) var limits: WireLimits
    private var buffer: ByteBuffer
    /// `buffer` is a chunk as the caller fed it (often a slice of a much larger buffer, such
    /// as one TLS record's plaintext): it is copied before `next()` waits for more bytes, so
    /// the decoder never keeps a caller's storage alive between feeds.
    private var borrowed = false
    private var state: State = .header

    public init(limits: WireLimits = .default) {
        self.limits = limits
        self.buffer = ByteBuffer()
    }

    /// Sets the largest payload accepted from the next frame header on (a stream that accepts
    /// small frames until it is authenticated, then its full maximum). A header already checked
    /// is not checked again.
    public mutating func setMaxFrameSize(_ size: Int) {
        limits.maxFrameSize = size
    }

    /// The bytes received but not yet returned as frames (or skipped).
    public var bufferedBytes: Int { buffer.readableBytes }

    /// Appends received bytes. Cheap when nothing is buffered: the chunk is decoded where it
    /// is, and only what is left of it when `next()` needs more (a partial frame) is copied.
    public mutating func feed(_ bytes: ByteBuffer) {
        if case .failed = state { return }
        if buffer.readableBytes == 0 {
            buffer = bytes
            borrowed = true
        } else {
            if borrowed { ownBuffer() }
            var bytes = bytes
            buffer.writeBuffer(&bytes)
        }
    }

    /// Copies what is buffered if it still shares a fed chunk's storage: for a caller that
    /// stops calling `next()` for a while with bytes left (`next()` does it itself when it
    /// needs more bytes).
    public mutating func detach() {
        if borrowed { ownBuffer() }
    }

    /// Replaces a fed chunk by a copy of its unread bytes (nothing when all were read).
    private mutating func ownBuffer() {
        borrowed = false
        guard buffer.readableBytes > 0 else {
            buffer = ByteBuffer()
            return
        }
        var copy = ByteBuffer()
        copy.reserveCapacity(buffer.readableBytes)
        copy.writeImmutableBuffer(buffer)
        buffer = copy
    }

    /// `next()` needs more bytes: keep nothing of the caller's storage meanwhile.
    private mutating func needMore() -> Frame? {
        if borrowed { ownBuffer() }
        return nil
    }

    /// The next whole frame, or nil when more bytes are needed.
    public mutating func next() throws(WireError) -> Frame? {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .header:
                guard let header = FrameHeader.peek(buffer) else { return needMore() }
                let disposition: FrameHeader.Disposition
                do {
                    disposition = try header.check(limits)
                } catch {
                    fail(error)
                    throw error
                }
                buffer.moveReaderIndex(forwardBy: FrameHeader.size)
                switch disposition {
                case .decode(let type): state = .payload(type, length: Int(header.payloadLength))
                case .skip: state = .skipping(remaining: Int(header.payloadLength))
                }
            case .payload(let type, let length):
                guard buffer.readableBytes >= length else { return needMore() }
                state = .header
                let frame: Frame
                do {
                    frame = try Frame.decodePayload(type, in: buffer, offset: 0, length: length, limits)
                } catch {
                    fail(error)
                    throw error
                }
                buffer.moveReaderIndex(forwardBy: length)
                reclaim()
                return frame
            case .skipping(let remaining):
                let n = min(remaining, buffer.readableBytes)
                buffer.moveReaderIndex(forwardBy: n)
                reclaim()
                if n == remaining {
                    state = .header
                } else {
                    state = .skipping(remaining: remaining &- n)
                    return needMore()
                }
            }
        }
    }

    /// Declares the end of the stream: fails with `truncated` when a frame is incomplete.
    public mutating func finish() throws(WireError) {
        if case .failed(let error) = state { throw error }
        let inFrame: Bool
        switch state {
        case .header: inFrame = buffer.readableBytes > 0
        case .payload, .skipping: inFrame = true
        case .failed: inFrame = false
        }
        guard !inFrame else {
            let error = WireError(.truncated, "the stream ends inside a frame (\(buffer.readableBytes) bytes buffered)")
            fail(error)
            throw error
        }
    }

    private mutating func fail(_ error: WireError) {
        state = .failed(error)
        buffer = ByteBuffer()
    }

    /// Drops consumed bytes when they make up most of the buffer (SPEC-independent hygiene:
    /// the buffer never grows beyond one frame plus one chunk).
    /// A fed chunk is left alone (`needMore()` copies what remains of it).
    private mutating func reclaim() {
        if !borrowed, buffer.readableBytes > 0, buffer.readerIndex >= 4_096, buffer.readerIndex >= buffer.readableBytes
        {
            buffer.discardReadBytes()
        }
    }
}
