import LaminaWire
import NIOCore

/// Everything a `FrameDecoder` produced from a byte stream: its frames in order, then how
/// the stream ended. Two feedings of the same bytes must produce equal outcomes.
public struct StreamOutcome: Hashable, Sendable, CustomStringConvertible {
    /// How the stream ended.
    public enum End: Hashable, Sendable {
        /// All input was consumed at a frame boundary: `next()` returned nil, `finish()` passed.
        case complete
        /// All input was consumed inside a frame: `next()` returned nil, `finish()` threw this.
        case incomplete(WireError.Code)
        /// `next()` threw an error with this code (and kept throwing it).
        case failed(WireError.Code)
    }

    public var frames: [Frame]
    public var end: End

    public var description: String { "\(frames.count) frame(s), then \(end)" }
}
