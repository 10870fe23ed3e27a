import Foundation
import LaminaModel
import NIOCore

/// A message's body — its parts (SPEC §3.12) followed by its optional push configuration
/// (§3.13), in the wire encoding — as one byte string. The node stores a message's body in
/// one column this way instead of a row per part, so a message costs one row.
public enum MessageBodyCoding {
    /// The body bytes of `parts`, `push` and `mentions` (the message's trailer, §3.17: a body
    /// without mentions is the bytes it was before them).
    public static func encode(parts: [MessagePart], push: PushConfiguration?, mentions: Set<UserID> = [])
        throws(WireError) -> [UInt8]
    {
        var buffer = ByteBuffer()
        try buffer.writeParts(parts)
        try buffer.writeMessageTrailer(push: push, mentions: mentions)
        return Array(buffer.readableBytesView)
    }

    /// The parts, push configuration and mentions of body bytes made by `encode`; every byte
    /// must be used.
    public static func decode(_ bytes: some ContiguousBytes, limits: WireLimits = .default) throws(WireError) -> (
        parts: [MessagePart], push: PushConfiguration?, mentions: Set<UserID>
    ) {
        let result: Result<([MessagePart], PushConfiguration?, Set<UserID>), WireError> = bytes.withUnsafeBytes {
            raw in
            var reader = PayloadReader(raw)
            do throws(WireError) {
                let parts = try reader.readParts(limits)
                let (push, mentions) = try reader.readMessageTrailer(limits)
                guard reader.readableBytes == 0 else {
                    return .failure(WireError(.malformed, "\(reader.readableBytes) bytes follow a message body"))
                }
                return .success((parts, push, mentions))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
