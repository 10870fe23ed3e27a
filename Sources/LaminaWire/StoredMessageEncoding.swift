import LaminaModel
import NIOCore

/// A `message-created` event (kind 6, or kind 21 for a reply: SPEC §6.4) of a stored message,
/// as a feed read takes it from the message's columns, for a catch-up: the stored body (parts
/// and trailer, already in the wire encoding: ``MessageBodyCoding``) is checked but not decoded
/// into parts, and when the change is encoded its bytes are copied into the frame with the
/// statuses the feed's user is shown. The bytes are those `ChangeEvent.messageCreated` encodes
/// for the same message; a ``Change`` holding it (``SharedChangeEvent/init(_:)``) decodes its
/// event only when asked for it. A class: a change holds it as one reference (a `Change` is
/// copied often, and these fields are most of a message).
public final class StoredMessageEncoding: Hashable, Sendable {
    let id: MessageID
    let conversationID: ConversationID
    let sender: UserID
    let sentAt: Timestamp
    let position: MessagePosition
    let body: [UInt8]
    /// Where the body's trailer ends: a reply's root tag and id follow.
    let trailerEnd: Int
    let replyTo: MessageID?
    /// In ascending user order.
    let statuses: [(user: UserID, status: RecipientStatus)]

    /// - Parameters:
    ///   - body: the stored body, checked as ``MessageBodyCoding/decode(_:limits:)`` checks it.
    ///   - statuses: every recipient status the viewer is shown, in ascending order of the
    ///     users (the order `writeMessage` sorts them in).
    public init(
        id: MessageID, conversationID: ConversationID, sender: UserID, sentAt: Timestamp, position: MessagePosition,
        body: [UInt8], statuses: [(user: UserID, status: RecipientStatus)]
    ) throws(WireError) {
        let layout = try MessageBodyCoding.layout(body)
        guard statuses.count <= WireLimits.default.maxParticipants else {
            throw WireError(
                .tooManyParticipants, "recipient status has at most \(WireLimits.default.maxParticipants) entries")
        }
        for i in statuses.indices.dropFirst() where !(statuses[i - 1].user < statuses[i].user) {
            throw WireError(.nonCanonical, "recipient statuses must be given in strictly ascending user order")
        }
        self.id = id
        self.conversationID = conversationID
        self.sender = sender
        self.sentAt = sentAt
        self.position = position
        self.body = body
        self.trailerEnd = layout.trailerEnd
        self.replyTo = layout.replyTo
        self.statuses = statuses
    }

    public static func == (a: StoredMessageEncoding, b: StoredMessageEncoding) -> Bool {
        a === b
            || (a.id == b.id && a.conversationID == b.conversationID && a.sender == b.sender && a.sentAt == b.sentAt
                && a.position == b.position && a.body == b.body
                && a.statuses.elementsEqual(b.statuses) { $0.user == $1.user && $0.status == $1.status })
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(body)
        for (user, status) in statuses {
            hasher.combine(user)
            hasher.combine(status)
        }
    }

    /// The event's kind: 21 for a reply, else 6.
    public var kind: UInt8 { replyTo == nil ? 6 : 21 }

    /// About the size of the encoded event (for batch and answer budgets).
    public var estimatedSize: Int { 64 + body.count + statuses.count * 24 }

    /// Writes the event: kind, the message (SPEC §3.17), a reply's thread fields.
    func write(into b: inout ByteBuffer) throws(WireError) {
        b.reserveCapacity(minimumWritableBytes: estimatedSize)
        b.writeInteger(kind, as: UInt8.self)
        b.writeID(id)
        b.writeID(conversationID)
        try b.writeUserID(sender)
        b.writeInteger(1, as: UInt8.self)
        b.writeTimestamp(sentAt)
        b.writeInteger(1, as: UInt8.self)
        b.writeHLC(position)
        body.withUnsafeBytes { _ = b.writeBytes(UnsafeRawBufferPointer(rebasing: $0[..<trailerEnd])) }
        b.writeVarint(UInt64(statuses.count))
        for (user, status) in statuses {
            try b.writeUserID(user)
            b.writeInteger(UInt8(bitPattern: status.rawValue), as: UInt8.self)
        }
        if let replyTo {
            b.writeInteger(1, as: UInt8.self)
            b.writeID(replyTo)
        }
    }
}
