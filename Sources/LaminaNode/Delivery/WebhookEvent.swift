import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// One webhook event as the outbox row keeps it: the facts its JSON is rendered from, not
/// the JSON. The command's transaction (on the writer thread) only encodes these (the
/// message or conversation in its CHANGE-frame encoding, which the feeds use too); the
/// delivery lane renders the payload when it sends (``json(config:)``), the same every
/// attempt. Everything the rendering reads is in the row (the event id, time, actor, the
/// Server API base URL of the moment, the objects as they were), so a later change of the
/// message, the conversation or the node's configuration does not change a queued event.
struct WebhookEvent: Equatable, Sendable {
    /// What the event is about.
    enum Subject: Equatable, Sendable {
        /// `message.sent`, `message.updated` and `message.deleted` (the message as it was):
        /// the message as committed.
        case message(Message)
        /// `conversation.created` and `conversation.deleted` (as it was).
        case conversation(Conversation)
        /// `message.deleted` of rows queued before deletions carried the message: ids only.
        case deletedMessage(MessageID, in: ConversationID)
        /// `conversation.deleted` of rows queued before deletions carried the conversation.
        case deletedConversation(ConversationID)
        /// `conversation.updated`: the conversation as it is now and what changed.
        case conversationUpdate(Conversation, [WebhookConversationChange])
        /// `Receipt.created`.
        case receipt(WebhookReceipt)
        /// `MessagePart.*`: the message holding only the part (as it is now; for a deletion,
        /// as it was).
        case part(Message)
        /// `Identity.*`: the identity as set (for a deletion, as it was).
        case identity(WebhookIdentity)
        /// `Channel.*`: the channel (for a deletion, as it was).
        case channel(WebhookChannel)
        /// `Membership.*`: the member and the channel.
        case membership(WebhookMembership)
        /// `ChannelMessage.created`: the message as stored (with its place in the log).
        case channelMessage(ChannelMessage)
        /// `Message.reactions_changed`: the message, its reactions after the change, and the change.
        case reaction(Message, WebhookReaction)
        /// `message.updated` (`Message.edited`): the message as it is now and its parts before.
        case edited(Message, before: [MessagePart])
    }

    var type: WebhookEventType
    /// The event's id (one per event, shared by the rows of all its webhooks).
    var id: UUID
    var createdAt: Timestamp
    /// Who caused it (absent: no `actor` in the payload).
    var actor: UserID?
    /// `https://host:port/apps/<app id>` for the payload's `url` fields.
    var base: String
    var subject: Subject

    // MARK: Rendering

    /// The payload (`event`, `actor`, `message` or `conversation`, and the webhook's `config`)
    /// as JSON: keys sorted, slashes not escaped, dates as Layer's. `typeName` is the name the
    /// webhook knows the event by (``WebhookEventNames``).
    func json(config: JSONValue?, typeName: String? = nil) throws -> Data {
        let r = ServerAPIRepresentation(base: base, version: .v3)
        var payload = WebhookPayload(
            event: .init(
                type: typeName ?? type.rawValue, id: id.uuidString.lowercased(),
                created_at: ServerAPIJSON.date(millisecondsSince1970: createdAt.millisecondsSince1970)),
            actor: actor.map(r.sender), config: config)
        switch subject {
        case .message(let m): payload.message = .full(r.message(m))
        case .conversation(let c): payload.conversation = .full(r.conversation(c))
        case .deletedMessage(let m, let c):
            payload.message = .reference(
                MessageReference(
                    id: ServerAPIRepresentation.messageID(m),
                    conversation: ConversationReference(id: ServerAPIRepresentation.conversationID(c))))
        case .deletedConversation(let c):
            payload.conversation = .reference(ConversationReference(id: ServerAPIRepresentation.conversationID(c)))
        case .conversationUpdate(let c, let changes):
            payload.conversation = .full(r.conversation(c))
            payload.changes = changes.map { WebhookChangeObject($0, r) }
        case .receipt(let receipt):
            payload.receipt = WebhookReceiptObject(receipt, base: base)
        case .part(let m):
            payload.message_part = r.parts(m.parts, of: m.id).first
            payload.message = .reference(r.messageReference(m.id, in: m.conversationID))
        case .identity(let i):
            var withIdentity = r
            if let user = try? UserID(i.user) {
                withIdentity.identities[user] = i.identity
                payload.identity = withIdentity.identity(user)
            }
        case .channel(let c): payload.channel = r.channel(c)
        case .membership(let m): payload.membership = WebhookMembershipObject(m, r)
        case .channelMessage(let m): payload.message = .channel(r.channelMessage(m))
        case .reaction(let m, let reaction):
            payload.message = .full(r.message(m, reactions: reaction.summaries))
            payload.reaction = WebhookReactionObject(
                key: reaction.key, user_id: "layer:///identities/\(reaction.user)", present: reaction.present)
        case .edited(let m, let before):
            payload.message = .full(r.message(m))
            payload.changes = [WebhookChangeObject(parts: before, after: m.parts, of: m.id, r)]
        }
        return try ServerAPIJSON.encode(payload)
    }

    // MARK: The row's bytes

    /// The first byte of a row written as facts. Rows queued before (rendered JSON) start
    /// with `{`; the lane sends those as they are.
    static let factsFormat: UInt8 = 1

    /// ```
    /// | format (1) | type (u16 len + UTF-8) | id (16) | created at (i64 ms) | base (u32 len + UTF-8)
    /// | actor (u8 0/1, then u16 len + UTF-8) | subject kind (u8) | subject
    /// ```
    /// Subject: kind 0 a message and 1 a conversation, each as its CHANGE frame (u32 length
    /// and bytes); 2 a deleted message (message id, conversation id: 16 bytes each); 3 a
    /// deleted conversation (its id); 4 a conversation's frame and its changes (u32 length and
    /// JSON); 5 a receipt (u32 length and JSON); 6 a message's frame holding only the part; 7
    /// an identity (u32 length and JSON); 8 a channel and 9 a membership (u32 length and JSON);
    /// 10 a channel message as its CHANGE frame (kind 18); 11 a message's frame and a reaction
    /// change (u32 length and JSON).
    func facts() throws -> Data {
        var b = ByteBuffer()
        b.writeInteger(Self.factsFormat)
        try Self.write(type.rawValue, lengthAs: UInt16.self, to: &b)
        Self.write(id, to: &b)
        b.writeInteger(createdAt.millisecondsSince1970)
        try Self.write(base, lengthAs: UInt32.self, to: &b)
        if let actor {
            b.writeInteger(UInt8(1))
            try Self.write(actor.rawValue, lengthAs: UInt16.self, to: &b)
        } else {
            b.writeInteger(UInt8(0))
        }
        switch subject {
        case .message(let m):
            b.writeInteger(UInt8(0))
            let frame = try FeedCoding.encode(.messageCreated(m))
            b.writeInteger(UInt32(frame.count))
            b.writeBytes(frame)
        case .conversation(let c):
            b.writeInteger(UInt8(1))
            let frame = try FeedCoding.encode(.conversationCreated(c))
            b.writeInteger(UInt32(frame.count))
            b.writeBytes(frame)
        case .deletedMessage(let m, let c):
            b.writeInteger(UInt8(2))
            Self.write(m.uuid, to: &b)
            Self.write(c.uuid, to: &b)
        case .deletedConversation(let c):
            b.writeInteger(UInt8(3))
            Self.write(c.uuid, to: &b)
        case .conversationUpdate(let c, let changes):
            b.writeInteger(UInt8(4))
            Self.write(frame: try FeedCoding.encode(.conversationCreated(c)), to: &b)
            Self.write(frame: Array(try JSONEncoder().encode(changes)), to: &b)
        case .receipt(let receipt):
            b.writeInteger(UInt8(5))
            Self.write(frame: Array(try JSONEncoder().encode(receipt)), to: &b)
        case .part(let m):
            b.writeInteger(UInt8(6))
            Self.write(frame: try FeedCoding.encode(.messageCreated(m)), to: &b)
        case .identity(let i):
            b.writeInteger(UInt8(7))
            Self.write(frame: Array(try JSONEncoder().encode(i)), to: &b)
        case .channel(let c):
            b.writeInteger(UInt8(8))
            Self.write(frame: Array(try JSONEncoder().encode(c)), to: &b)
        case .membership(let m):
            b.writeInteger(UInt8(9))
            Self.write(frame: Array(try JSONEncoder().encode(m)), to: &b)
        case .channelMessage(let m):
            b.writeInteger(UInt8(10))
            Self.write(frame: try FeedCoding.encode(.channelMessage(m)), to: &b)
        case .reaction(let m, let reaction):
            b.writeInteger(UInt8(11))
            Self.write(frame: try FeedCoding.encode(.messageCreated(m)), to: &b)
            Self.write(frame: Array(try JSONEncoder().encode(reaction)), to: &b)
        case .edited(let m, let before):
            // Kind 21 (this branch's change kind, so that branches adding kinds do not collide):
            // the message now, then the message with its parts before (CHANGE frames).
            b.writeInteger(UInt8(21))
            Self.write(frame: try FeedCoding.encode(.messageCreated(m)), to: &b)
            var old = m
            old.parts = before
            Self.write(frame: try FeedCoding.encode(.messageCreated(old)), to: &b)
        }
        return Data(b.readableBytesView)
    }

    /// The event a row's facts hold; a ``WebhookEventFactsError`` when they do not read whole.
    init(facts: Data) throws {
        var b = ByteBuffer(bytes: facts)
        guard b.readInteger(as: UInt8.self) == Self.factsFormat else {
            throw WebhookEventFactsError("not a facts row (format byte)")
        }
        let typeName = try Self.read(&b, lengthAs: UInt16.self, "type")
        guard let type = WebhookEventType(rawValue: typeName) else {
            throw WebhookEventFactsError("unknown event type \(typeName)")
        }
        self.type = type
        id = try Self.readUUID(&b, "id")
        guard let ms = b.readInteger(as: Int64.self) else { throw WebhookEventFactsError("no creation time") }
        createdAt = Timestamp(millisecondsSince1970: ms)
        base = try Self.read(&b, lengthAs: UInt32.self, "base")
        switch b.readInteger(as: UInt8.self) {
        case 0: actor = nil
        case 1:
            let raw = try Self.read(&b, lengthAs: UInt16.self, "actor")
            do { actor = try UserID(raw) } catch { throw WebhookEventFactsError("actor: \(error)") }
        default: throw WebhookEventFactsError("no actor flag")
        }
        switch b.readInteger(as: UInt8.self) {
        case 0, 1:
            switch try Self.readChange(&b) {
            case .messageCreated(let m): subject = .message(m)
            case .conversationCreated(let c): subject = .conversation(c)
            case let other: throw WebhookEventFactsError("the subject is change kind \(other.kind)")
            }
        case 4:
            guard case .conversationCreated(let c) = try Self.readChange(&b) else {
                throw WebhookEventFactsError("an update's subject is not a conversation")
            }
            subject = .conversationUpdate(c, try Self.readJSON(&b, [WebhookConversationChange].self))
        case 5: subject = .receipt(try Self.readJSON(&b, WebhookReceipt.self))
        case 6:
            guard case .messageCreated(let m) = try Self.readChange(&b), m.parts.count == 1 else {
                throw WebhookEventFactsError("a part's subject is not a message with one part")
            }
            subject = .part(m)
        case 7: subject = .identity(try Self.readJSON(&b, WebhookIdentity.self))
        case 8: subject = .channel(try Self.readJSON(&b, WebhookChannel.self))
        case 9: subject = .membership(try Self.readJSON(&b, WebhookMembership.self))
        case 10:
            guard case .channelMessage(let m) = try Self.readChange(&b) else {
                throw WebhookEventFactsError("a channel message's subject is not a channel message")
            }
            subject = .channelMessage(m)
        case 11:
            guard case .messageCreated(let m) = try Self.readChange(&b) else {
                throw WebhookEventFactsError("a reaction's subject is not a message")
            }
            subject = .reaction(m, try Self.readJSON(&b, WebhookReaction.self))
        case 2:
            let m = try Self.readUUID(&b, "message id")
            let c = try Self.readUUID(&b, "conversation id")
            subject = .deletedMessage(MessageID(uuid: m), in: ConversationID(uuid: c))
        case 3: subject = .deletedConversation(ConversationID(uuid: try Self.readUUID(&b, "conversation id")))
        case 21:
            guard case .messageCreated(let m) = try Self.readChange(&b),
                case .messageCreated(let old) = try Self.readChange(&b)
            else { throw WebhookEventFactsError("an edit's subject is not two messages") }
            subject = .edited(m, before: old.parts)
        default: throw WebhookEventFactsError("no subject kind")
        }
        guard b.readableBytes == 0 else { throw WebhookEventFactsError("\(b.readableBytes) bytes after the subject") }
    }

    init(
        type: WebhookEventType, id: UUID = UUID(), createdAt: Timestamp, actor: UserID?, base: String, subject: Subject
    ) {
        self.type = type
        self.id = id
        self.createdAt = createdAt
        self.actor = actor
        self.base = base
        self.subject = subject
    }

    private static func write<L: FixedWidthInteger>(_ s: String, lengthAs: L.Type, to b: inout ByteBuffer) throws {
        guard let length = L(exactly: s.utf8.count) else {
            throw WebhookEventFactsError("a string of \(s.utf8.count) bytes is too long")
        }
        b.writeInteger(length)
        b.writeString(s)
    }

    private static func read<L: FixedWidthInteger>(_ b: inout ByteBuffer, lengthAs: L.Type, _ what: String) throws
        -> String
    {
        guard let length = b.readInteger(as: L.self), let s = b.readString(length: Int(length)) else {
            throw WebhookEventFactsError("a short \(what)")
        }
        return s
    }

    private static func write(frame: [UInt8], to b: inout ByteBuffer) {
        b.writeInteger(UInt32(frame.count))
        b.writeBytes(frame)
    }

    private static func readFrame(_ b: inout ByteBuffer) throws -> ByteBuffer {
        guard let length = b.readInteger(as: UInt32.self), let frame = b.readSlice(length: Int(length)) else {
            throw WebhookEventFactsError("a short subject frame")
        }
        return frame
    }

    private static func readChange(_ b: inout ByteBuffer) throws -> ChangeEvent {
        guard case .change(let change) = try Frame.decode(exactly: try readFrame(&b)) else {
            throw WebhookEventFactsError("the subject is not a change")
        }
        return change.event
    }

    private static func readJSON<T: Decodable>(_ b: inout ByteBuffer, _ type: T.Type) throws -> T {
        let frame = try readFrame(&b)
        do { return try JSONDecoder().decode(T.self, from: Data(frame.readableBytesView)) } catch {
            throw WebhookEventFactsError("\(T.self) does not decode: \(error)")
        }
    }

    private static func write(_ id: UUID, to b: inout ByteBuffer) {
        withUnsafeBytes(of: id.uuid) { _ = b.writeBytes($0) }
    }

    private static func readUUID(_ b: inout ByteBuffer, _ what: String) throws -> UUID {
        guard let bytes = b.readBytes(length: 16) else { throw WebhookEventFactsError("a short \(what)") }
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}

/// An outbox row's facts that do not read back (a bug, or a damaged row).
struct WebhookEventFactsError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = "webhook event facts: \(description)" }
}
