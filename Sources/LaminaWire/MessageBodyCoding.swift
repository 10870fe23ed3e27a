import Foundation
import LaminaModel
import NIOCore

/// A message's body — its parts (SPEC §3.12) followed by its optional push configuration
/// (§3.13), in the wire encoding — as one byte string. The node stores a message's body in
/// one column this way instead of a row per part, so a message costs one row.
public enum MessageBodyCoding {
    /// The body bytes of `parts`, `push` and `mentions` (the message's trailer, §3.17: a body
    /// without mentions is the bytes it was before them). A reply's root (`replyTo`) follows as
    /// a tag byte 1 and the root's id; a body without it ends after the trailer, as every body
    /// did before replies.
    public static func encode(
        parts: [MessagePart], push: PushConfiguration?, mentions: Set<UserID> = [], replyTo: MessageID? = nil
    )
        throws(WireError) -> [UInt8]
    {
        var buffer = ByteBuffer()
        try buffer.writeParts(parts)
        try buffer.writeMessageTrailer(push: push, mentions: mentions)
        if let replyTo {
            buffer.writeInteger(1, as: UInt8.self)
            buffer.writeID(replyTo)
        }
        return Array(buffer.readableBytesView)
    }

    /// The parts, push configuration and mentions of body bytes made by `encode`; every byte
    /// must be used.
    public static func decode(_ bytes: some ContiguousBytes, limits: WireLimits = .default) throws(WireError) -> (
        parts: [MessagePart], push: PushConfiguration?, mentions: Set<UserID>, replyTo: MessageID?
    ) {
        let body = try read(bytes, limits: limits)
        return (body.parts, body.push, body.mentions, body.replyTo)
    }

    /// Where the trailer of body bytes made by `encode` ends (a reply's root follows it), and
    /// the root replied to; the body is checked as `decode` checks it.
    public static func layout(_ bytes: some ContiguousBytes, limits: WireLimits = .default) throws(WireError) -> (
        trailerEnd: Int, replyTo: MessageID?
    ) {
        let body = try read(bytes, limits: limits)
        return (body.trailerEnd, body.replyTo)
    }

    private static func read(_ bytes: some ContiguousBytes, limits: WireLimits) throws(WireError) -> (
        parts: [MessagePart], push: PushConfiguration?, mentions: Set<UserID>, replyTo: MessageID?, trailerEnd: Int
    ) {
        let result: Result<([MessagePart], PushConfiguration?, Set<UserID>, MessageID?, Int), WireError> =
            bytes.withUnsafeBytes { raw in
                var reader = PayloadReader(raw)
                do throws(WireError) {
                    let parts = try reader.readParts(limits)
                    let (push, mentions) = try reader.readMessageTrailer(limits)
                    let trailerEnd = reader.readerIndex
                    var replyTo: MessageID?
                    if reader.readableBytes > 0 {
                        guard try reader.readU8("the reply tag") == 1 else {
                            return .failure(WireError(.malformed, "a message body's reply tag is not 1"))
                        }
                        replyTo = try reader.readID(MessageID.self, "the message replied to")
                    }
                    guard reader.readableBytes == 0 else {
                        return .failure(WireError(.malformed, "\(reader.readableBytes) bytes follow a message body"))
                    }
                    return .success((parts, push, mentions, replyTo, trailerEnd))
                } catch {
                    return .failure(error)
                }
            }
        let body = try result.get()
        return (body.0, body.1, body.2, body.3, body.4)
    }
}
