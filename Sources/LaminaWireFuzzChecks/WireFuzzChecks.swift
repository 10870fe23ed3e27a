import LaminaWire
import NIOCore

/// The properties of the sync-frame codec that the fuzz targets (Fuzz/) check on random
/// input and that `FailCasesReplayTests` asserts on every saved failing input and on every
/// vector in Protocol/vectors. Each check either returns what it observed or throws the
/// `PropertyViolation` it found; it never traps on a codec error, only reports it.
public enum WireFuzzChecks {
    /// Decode: feeding `input` to a `FrameDecoder` and draining it ends in nil (then
    /// `finish()` tells whether the stream ended inside a frame) or an error, makes progress
    /// (never more frames than input bytes), and a failed decoder stays failed.
    @discardableResult
    public static func checkDecode(_ input: [UInt8], limits: WireLimits = .default) throws(PropertyViolation)
        -> StreamOutcome
    {
        var decoder = FrameDecoder(limits: limits)
        decoder.feed(ByteBuffer(bytes: input))
        var frames: [Frame] = []
        if let code = try drain(&decoder, into: &frames, bound: input.count, property: "decode", input: input) {
            return StreamOutcome(frames: frames, end: .failed(code))
        }
        return StreamOutcome(frames: frames, end: finish(&decoder))
    }

    /// What a single `decode(exactly:)` did with the input.
    public enum RoundTripOutcome: Hashable, Sendable {
        /// The input is not exactly one valid frame; the codec said why.
        case rejected(WireError.Code)
        /// The input is one valid frame, and every round-trip property held for it.
        case roundTripped(Frame)
    }

    /// Round trip: whatever `Frame.decode(exactly:)` accepts re-encodes to the very same
    /// bytes (canonical encoding), decodes again to an equal frame, and comes out of a
    /// `FrameDecoder` fed the same bytes as that frame alone.
    @discardableResult
    public static func checkRoundTrip(_ input: [UInt8], limits: WireLimits = .default) throws(PropertyViolation)
        -> RoundTripOutcome
    {
        func violation(_ detail: String) -> PropertyViolation {
            PropertyViolation(property: "round-trip", detail: detail, input: input)
        }
        let frame: Frame
        do {
            frame = try Frame.decode(exactly: ByteBuffer(bytes: input), limits: limits)
        } catch {
            return .rejected(error.code)
        }
        let encoded: ByteBuffer
        do {
            encoded = try frame.encoded()
        } catch {
            throw violation("a decoded frame failed to encode: \(error)")
        }
        guard encoded.readableBytesView.elementsEqual(input) else {
            throw violation("re-encoding gave different bytes: \(hex(encoded.readableBytesView))")
        }
        let again: Frame
        do {
            again = try Frame.decode(exactly: encoded, limits: limits)
        } catch {
            throw violation("the re-encoded bytes failed to decode: \(error)")
        }
        guard again == frame else { throw violation("decode(encode(frame)) differs from frame") }
        let streamed = try checkDecode(input, limits: limits)
        guard streamed == StreamOutcome(frames: [frame], end: .complete) else {
            throw violation("FrameDecoder gave \(streamed) where decode(exactly:) gave one frame")
        }
        return .roundTripped(frame)
    }

    /// Split feed: feeding `stream` to a `FrameDecoder` in chunks of `chunkSizes` (cycled;
    /// a zero feeds an empty buffer) yields the same frames and the same end as feeding it
    /// all at once.
    @discardableResult
    public static func checkSplitFeed(stream: [UInt8], chunkSizes: [Int], limits: WireLimits = .default)
        throws(PropertyViolation) -> StreamOutcome
    {
        let whole = try checkDecode(stream, limits: limits)
        var decoder = FrameDecoder(limits: limits)
        var frames: [Frame] = []
        var failure: WireError.Code?
        var offset = 0
        var feeds = 0
        // A bound on the number of feeds keeps all-zero chunk sizes from looping forever.
        let maxFeeds = stream.count + chunkSizes.count + 1
        while offset < stream.count || feeds == 0 {
            feeds += 1
            let size =
                chunkSizes.isEmpty || feeds > maxFeeds
                ? stream.count - offset
                : min(max(chunkSizes[(feeds - 1) % chunkSizes.count], 0), stream.count - offset)
            decoder.feed(ByteBuffer(bytes: stream[offset..<(offset + size)]))
            offset += size
            failure = try drain(&decoder, into: &frames, bound: stream.count, property: "split-feed", input: stream)
            if failure != nil { break }
        }
        let split = StreamOutcome(frames: frames, end: failure.map { .failed($0) } ?? finish(&decoder))
        guard split == whole else {
            throw PropertyViolation(
                property: "split-feed",
                detail: "chunks of \(chunkSizes) gave \(split), all at once gave \(whole)"
                    + (split.frames == whole.frames ? "" : " (frames differ)"),
                input: stream
            )
        }
        return split
    }

    /// Split feed for a fuzz input: the first byte `n` gives the number of chunk sizes
    /// (`n % 8`), the next `n % 8` bytes are the sizes, and the rest is the stream.
    @discardableResult
    public static func checkSplitFeed(fuzzInput input: [UInt8], limits: WireLimits = .default) throws(PropertyViolation)
        -> StreamOutcome
    {
        let (stream, chunkSizes) = splitFeedPlan(input)
        return try checkSplitFeed(stream: stream, chunkSizes: chunkSizes, limits: limits)
    }

    /// Parses a split-feed fuzz input into its stream and chunk sizes.
    public static func splitFeedPlan(_ input: [UInt8]) -> (stream: [UInt8], chunkSizes: [Int]) {
        guard let first = input.first else { return ([], []) }
        let count = min(Int(first % 8), input.count - 1)
        let sizes = input[1..<(1 + count)].map { Int($0) }
        return (Array(input[(1 + count)...]), sizes)
    }

    /// Makes a split-feed fuzz input that feeds `stream` in chunks of `chunkSizes` (at most 7, each 0...255).
    public static func splitFeedInput(stream: [UInt8], chunkSizes: [UInt8]) -> [UInt8] {
        precondition(chunkSizes.count < 8, "a split-feed input carries at most 7 chunk sizes")
        return [UInt8(chunkSizes.count)] + chunkSizes + stream
    }

    /// Drains a decoder until it returns nil (result nil) or throws (result: the error's code);
    /// checks progress and that a failed decoder keeps failing with the same code.
    private static func drain(
        _ decoder: inout FrameDecoder,
        into frames: inout [Frame],
        bound: Int,
        property: String,
        input: [UInt8]
    ) throws(PropertyViolation) -> WireError.Code? {
        while true {
            let next: Frame?
            do {
                next = try decoder.next()
            } catch {
                let code = error.code
                let after: Frame?
                do {
                    after = try decoder.next()
                } catch let again {
                    guard again.code == code else {
                        throw PropertyViolation(
                            property: property, detail: "decoder failed with \(code), then with \(again.code)",
                            input: input)
                    }
                    return code
                }
                throw PropertyViolation(
                    property: property,
                    detail:
                        "decoder failed with \(code), then returned \(after.map { "\($0)" } ?? "nil") instead of failing again",
                    input: input
                )
            }
            guard let frame = next else { return nil }
            frames.append(frame)
            guard frames.count <= bound else {
                throw PropertyViolation(
                    property: property, detail: "more frames (\(frames.count)) than input bytes (\(bound))",
                    input: input)
            }
        }
    }

    /// Ends the stream after all input was drained.
    private static func finish(_ decoder: inout FrameDecoder) -> StreamOutcome.End {
        do {
            try decoder.finish()
            return .complete
        } catch {
            return .incomplete(error.code)
        }
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.prefix(256).map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
