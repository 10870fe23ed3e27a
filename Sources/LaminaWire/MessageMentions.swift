import Foundation
import LaminaModel
import NIOCore

/// A message's trailer (SPEC §3.17): the byte after its parts says what follows them — bit 0
/// its push configuration (§3.13), bit 1 its mentions (a user set, 1 to 250 users, §3.9; the
/// mentions feature, §5.1 bit 17) — then those fields in that order. Any other bit is
/// `malformed`; bit 1 with an empty set is `non-canonical`. Without mentions the byte is the
/// push configuration's presence byte it always was, so a message without mentions has the
/// encoding it had before the feature.
extension ByteBuffer {
    mutating func writeMessageTrailer(push: PushConfiguration?, mentions: Set<UserID>) throws(WireError) {
        writeInteger((push == nil ? 0 : 1) | (mentions.isEmpty ? 0 : 2), as: UInt8.self)
        if let push { try writePush(push) }
        if !mentions.isEmpty { try writeUserSet(mentions) }
    }
}

extension PayloadReader {
    mutating func readMessageTrailer(_ limits: WireLimits) throws(WireError) -> (
        push: PushConfiguration?, mentions: Set<UserID>
    ) {
        let flags = try peekU8("the message trailer")
        guard flags <= 3 else {
            throw WireError(.malformed, "the message trailer byte is 0x\(String(flags, radix: 16)) (bits 0 and 1 only)")
        }
        moveReaderIndex(forwardBy: 1)
        let push = flags & 1 != 0 ? try readPush(limits) : nil
        guard flags & 2 != 0 else { return (push, []) }
        let mentions = try readUserSet(limits)
        guard !mentions.isEmpty else {
            throw WireError(.nonCanonical, "a message's mentions are present but empty (leave bit 1 clear)")
        }
        return (push, mentions)
    }
}

extension Message {
    /// The message as a session or peer without the mentions feature reads it (itself when it
    /// mentions no one).
    public var withoutMentions: Message {
        guard !mentions.isEmpty else { return self }
        var out = self
        out.mentions = []
        return out
    }
}

extension Change {
    /// The change as a session without the mentions feature (SPEC §5.1 bit 17) reads it: a
    /// created message without its mentions (itself, encoding kept, otherwise).
    public var withoutMentions: Change {
        guard case .messageCreated(let message) = event, !message.mentions.isEmpty else { return self }
        return Change(seq: seq, event: .messageCreated(message.withoutMentions))
    }
}

extension ReplicatedOperation {
    /// The operation as a peer without the mentions feature (its PEER_HELLO lacks bit 17) reads
    /// it: a sent message without its mentions.
    public var withoutMentions: ReplicatedOperation {
        guard case .change(.messageCreated(let message)) = payload, !message.mentions.isEmpty else { return self }
        var out = self
        out.payload = .change(.messageCreated(message.withoutMentions))
        return out
    }
}
