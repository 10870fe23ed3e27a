import LaminaModel
import NIOCore

// Replies and threads on the wire (SPEC §6.2, §6.4 kind 21, replies feature §5.1 bit 15).
//
// kind 21 `thread-message`: the message (§3.17), then its role:
// ```
// +---------------+------------------------------------------------------------------------+
// | message §3.17 | role (u8): 1 reply   -> replyTo (uuid)                                 |
// |               |            2 root    -> replyCount (varint, >= 1), lastReply (uuid),   |
// |               |                         lastReplyAt (hlc)                              |
// +---------------+------------------------------------------------------------------------+
// ```
// Any other role byte, or a reply count of 0, is `malformed`: a message with neither is kind 6,
// so every message has exactly one encoding. A reply is never a root (threads are one level).

extension Message {
    /// Whether the message travels as kind 21 (`thread-message`) rather than kind 6: it is a
    /// reply, or a root with replies.
    public var hasThreadFields: Bool { replyTo != nil || thread != nil }

    /// The message as a session or peer without the replies feature reads it: no reply or
    /// thread fields (kind 6, exactly as before the feature).
    public var withoutThreadFields: Message {
        guard hasThreadFields else { return self }
        var out = self
        out.replyTo = nil
        out.thread = nil
        return out
    }
}

extension ByteBuffer {
    /// Kind 21's fields after the message.
    mutating func writeThreadFields(_ m: Message) throws(WireError) {
        switch (m.replyTo, m.thread) {
        case (let root?, nil):
            writeInteger(1, as: UInt8.self)
            writeID(root)
        case (nil, let thread?):
            guard thread.replyCount >= 1 else {
                throw WireError(.invalidArgument, "a thread root has at least one reply")
            }
            writeInteger(2, as: UInt8.self)
            writeVarint(thread.replyCount)
            writeID(thread.lastReply)
            writeHLC(thread.lastReplyAt)
        case (_?, _?):
            throw WireError(
                .invalidArgument, "message \(m.id) is a reply and a thread root: threads are one level deep")
        case (nil, nil):
            throw WireError(.invalidArgument, "message \(m.id) has no thread fields: it is kind 6")
        }
    }
}

extension PayloadReader {
    /// Kind 21's fields after the message, into `message`.
    mutating func readThreadFields(into message: inout Message) throws(WireError) {
        let role = try readU8("the thread role")
        switch role {
        case 1:
            message.replyTo = try readID(MessageID.self, "the message replied to")
        case 2:
            let count = try readVarint("the reply count")
            // SPEC §6.4 kind 21: "a reply count of 0 is `malformed`".
            guard count >= 1 else { throw WireError(.malformed, "a thread root's reply count is at least 1") }
            let last = try readID(MessageID.self, "the last reply")
            let at = try readHLC("the last reply's position")
            message.thread = MessageThread(replyCount: count, lastReply: last, lastReplyAt: at)
        default:
            throw WireError(.malformed, "thread role \(role) is not 1 (reply) or 2 (root)")
        }
    }
}

extension ChangeEvent {
    /// The event as a session without the replies feature reads it (kind 6, not 21).
    public var withoutThreadFields: ChangeEvent {
        guard case .messageCreated(let m) = self, m.hasThreadFields else { return self }
        return .messageCreated(m.withoutThreadFields)
    }
}

extension Change {
    /// The change as a session without the replies feature reads it (itself when unchanged).
    public var withoutThreadFields: Change {
        guard kind == 21 else { return self }
        return Change(seq: seq, event: event.withoutThreadFields)
    }
}

extension ReplicatedOperation {
    /// The operation as a peer without the replies feature (its PEER_HELLO lacks bit 15) reads
    /// it: a reply replicates as a plain message (that peer's users see it in the conversation).
    public var withoutThreadFields: ReplicatedOperation {
        guard case .change(let event) = payload else { return self }
        var out = self
        out.payload = .change(event.withoutThreadFields)
        return out
    }
}
