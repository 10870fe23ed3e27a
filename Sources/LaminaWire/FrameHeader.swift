import NIOCore

/// The fixed 8-byte header in front of every frame's payload (SPEC §2.1):
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +---------------------------------------------------------------+
/// |                  payload length (u32, big-endian)             |
/// +-------------------------------+-------------------------------+
/// |     frame type (u16, BE)      |       flags (u16, BE)         |
/// +-------------------------------+-------------------------------+
/// |                   payload (length bytes) ...
/// ```
public struct FrameHeader: Hashable, Sendable {
    /// The header's size in bytes.
    public static let size = 8

    /// Flag bit 0 (SPEC §2.2): a receiver that does not know the frame type skips the frame
    /// instead of failing. Never set on the types this version defines.
    public static let skippableFlag: UInt16 = 0x0001

    public var payloadLength: UInt32
    public var type: UInt16
    public var flags: UInt16

    public init(payloadLength: UInt32, type: UInt16, flags: UInt16) {
        self.payloadLength = payloadLength
        self.type = type
        self.flags = flags
    }

    /// Reads a header at the reader index without moving it; nil when fewer than 8 bytes are readable.
    public static func peek(_ buffer: ByteBuffer) -> FrameHeader? {
        let i = buffer.readerIndex
        guard let length = buffer.getInteger(at: i, as: UInt32.self),
            let type = buffer.getInteger(at: i &+ 4, as: UInt16.self),
            let flags = buffer.getInteger(at: i &+ 6, as: UInt16.self)
        else { return nil }
        return FrameHeader(payloadLength: length, type: type, flags: flags)
    }

    /// What a receiver does with a frame, decided from the header alone (SPEC §2.2, §2.3, §8).
    enum Disposition {
        case decode(FrameType)
        case skip
    }

    /// Checks flags, type and length against the limits before any payload is buffered.
    func check(_ limits: WireLimits) throws(WireError) -> Disposition {
        // SPEC §2.2: "Bits 1 to 15 of flags are reserved and MUST be zero."
        guard flags & ~FrameHeader.skippableFlag == 0 else {
            throw WireError(
                .badFlags, "reserved flag bits 0x\(String(flags & ~FrameHeader.skippableFlag, radix: 16)) are set")
        }
        // SPEC §2.3: "(2) the length against its maximum frame size (`frame-too-large`)".
        guard UInt64(payloadLength) <= UInt64(max(0, limits.maxFrameSize)) else {
            throw WireError(
                .frameTooLarge,
                "payload of \(payloadLength) bytes exceeds the maximum frame size of \(limits.maxFrameSize)")
        }
        guard let known = FrameType(rawValue: type) else {
            // SPEC §8: "An unknown type is skipped when its SKIPPABLE flag is set, else refused."
            if flags & FrameHeader.skippableFlag != 0 { return .skip }
            throw WireError(.unknownFrameType, "unknown frame type 0x\(String(type, radix: 16))")
        }
        // SPEC §2.2: "SKIPPABLE MUST NOT be set on a type the sender's version defines."
        guard flags == 0 else {
            throw WireError(.badFlags, "flags 0x\(String(flags, radix: 16)) are not allowed on \(known.name)")
        }
        // SPEC §2.3: each type's payload has a maximum size, checked on the header.
        let typeMax = known.maxPayloadSize(limits)
        guard Int(payloadLength) <= typeMax else {
            throw WireError(
                .frameTooLarge,
                "a \(known.name) payload is at most \(typeMax) bytes, this one declares \(payloadLength)")
        }
        return .decode(known)
    }
}
