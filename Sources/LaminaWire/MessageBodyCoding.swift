import Foundation
import LaminaModel
import NIOCore

/// A message's body — its parts (SPEC §3.12) followed by its optional push configuration
/// (§3.13), in the wire encoding — as one byte string. The node stores a message's body in
/// one column this way instead of a row per part, so a message costs one row.
public enum MessageBodyCoding {
    /// The body bytes of `parts` and `push`.
    public static func encode(parts: [MessagePart], push: PushConfiguration?) throws(WireError) -> [UInt8] {
        var buffer = ByteBuffer()
        try buffer.writeParts(parts)
        if let push {
            buffer.writeInteger(1, as: UInt8.self)
            try buffer.writePush(push)
        } else {
            buffer.writeInteger(0, as: UInt8.self)
        }
        return Array(buffer.readableBytesView)
    }

    /// The parts and push configuration of body bytes made by `encode`; every byte must be used.
    public static func decode(_ bytes: some ContiguousBytes, limits: WireLimits = .default) throws(WireError) -> (
        parts: [MessagePart], push: PushConfiguration?
    ) {
        let result: Result<([MessagePart], PushConfiguration?), WireError> = bytes.withUnsafeBytes { raw in
            var reader = PayloadReader(raw)
            do throws(WireError) {
                let parts = try reader.readParts(limits)
                let push = try reader.readPresence("the push configuration") ? try reader.readPush(limits) : nil
                guard reader.readableBytes == 0 else {
                    return .failure(WireError(.malformed, "\(reader.readableBytes) bytes follow a message body"))
                }
                return .success((parts, push))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
