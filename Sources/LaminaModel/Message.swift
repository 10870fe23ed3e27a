import Foundation

/// How a message appears as a push notification on recipients' devices.
public struct PushConfiguration: Hashable, Sendable {
    public var alert: String?
    public var sound: String?
    public var title: String?
    public var category: String?
    /// Custom data delivered with the notification.
    public var data: [String: String]

    public init(
        alert: String? = nil, sound: String? = nil, title: String? = nil, category: String? = nil,
        data: [String: String] = [:]
    ) {
        self.alert = alert
        self.sound = sound
        self.title = title
        self.category = category
        self.data = data
    }

    /// Checks string lengths and the number of data entries.
    public func validate() throws(ModelError) {
        guard data.count <= Limits.maxPushDataEntries else {
            throw ModelError(
                .invalidPushConfiguration,
                "push data has at most \(Limits.maxPushDataEntries) entries, this one has \(data.count)")
        }
        let strings = [alert, sound, title, category].compactMap { $0 } + data.keys + data.values
        for s in strings where s.utf8.count > Limits.maxPushStringBytes {
            throw ModelError(
                .invalidPushConfiguration,
                "a push configuration string is at most \(Limits.maxPushStringBytes) UTF-8 bytes")
        }
    }
}

/// A message: one or more MIME-typed parts sent by one user to a conversation.
///
/// A value type whose fields live in one shared box, copied on the first change of a copy
/// (as `Array` does): a message is copied far more often than it is changed (into changes,
/// frames, feeds and stores), and a copy is then one reference instead of ~270 bytes and a
/// retain per field.
public struct Message: Hashable, Sendable, Identifiable {
    /// The message's fields; a `Message` changes them only when it holds the box alone.
    private struct Fields: Hashable {
        var id: MessageID
        var conversationID: ConversationID
        var sender: UserID
        var parts: [MessagePart]
        var sentAt: Timestamp?
        var position: MessagePosition?
        var push: PushConfiguration?
        var recipientStatus: [UserID: RecipientStatus]
        var replyTo: MessageID?
        var thread: MessageThread?
        var mentions: Set<UserID>
    }

    /// The box the copies of a message share until one of them changes.
    private final class Box: @unchecked Sendable {
        // Unchecked: a box is changed only through a `Message` that holds the only reference
        // (`fields`' `_modify` makes it unique first), so no box is changed while shared.
        @exclusivity(unchecked) var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    /// The fields, to change: the box is copied first when another message shares it.
    private var fields: Fields {
        get { box.fields }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            yield &box.fields
        }
    }

    public var id: MessageID {
        get { box.fields.id }
        _modify { yield &fields.id }
    }
    public var conversationID: ConversationID {
        get { box.fields.conversationID }
        _modify { yield &fields.conversationID }
    }
    public var sender: UserID {
        get { box.fields.sender }
        _modify { yield &fields.sender }
    }
    public var parts: [MessagePart] {
        get { box.fields.parts }
        _modify { yield &fields.parts }
    }
    /// When the node accepted the message; nil until then.
    public var sentAt: Timestamp? {
        get { box.fields.sentAt }
        _modify { yield &fields.sentAt }
    }
    /// The message's place in its conversation; assigned by the node, then fixed.
    public var position: MessagePosition? {
        get { box.fields.position }
        _modify { yield &fields.position }
    }
    public var push: PushConfiguration? {
        get { box.fields.push }
        _modify { yield &fields.push }
    }
    /// Each participant's status for this message.
    public var recipientStatus: [UserID: RecipientStatus] {
        get { box.fields.recipientStatus }
        _modify { yield &fields.recipientStatus }
    }
    /// The message this one replies to (its thread's root, in the same conversation); nil for
    /// a message that is not a reply (SPEC §6.2, replies feature).
    public var replyTo: MessageID? {
        get { box.fields.replyTo }
        _modify { yield &fields.replyTo }
    }
    /// The thread this message is the root of: its reply count and last reply as the node last
    /// reported them; nil when it has no replies (or the session does not take replies).
    public var thread: MessageThread? {
        get { box.fields.thread }
        _modify { yield &fields.thread }
    }
    /// The users the message mentions (SPEC §3.17, feature bit 17): a recipient whose
    /// notification level is `mentions` is notified of it (§6.10).
    public var mentions: Set<UserID> {
        get { box.fields.mentions }
        _modify { yield &fields.mentions }
    }

    public init(
        id: MessageID = .random(),
        conversationID: ConversationID,
        sender: UserID,
        parts: [MessagePart],
        sentAt: Timestamp? = nil,
        position: MessagePosition? = nil,
        push: PushConfiguration? = nil,
        recipientStatus: [UserID: RecipientStatus] = [:],
        replyTo: MessageID? = nil,
        thread: MessageThread? = nil,
        mentions: Set<UserID> = []
    ) {
        box = Box(
            Fields(
                id: id, conversationID: conversationID, sender: sender, parts: parts, sentAt: sentAt,
                position: position, push: push, recipientStatus: recipientStatus, replyTo: replyTo, thread: thread,
                mentions: mentions))
    }

    public static func == (a: Message, b: Message) -> Bool { a.box === b.box || a.box.fields == b.box.fields }

    public func hash(into hasher: inout Hasher) { box.fields.hash(into: &hasher) }

    /// The full identifier of one of this message's parts.
    public func identifier(of part: MessagePart) -> MessagePartID { MessagePartID(message: id, part: part.id) }

    /// Whether the node has accepted the message.
    public var isSent: Bool { position != nil }

    /// Checks the parts (1 to 1,000, each valid, no duplicate part ids) and the push configuration.
    public func validate() throws(ModelError) {
        try Self.validate(parts: parts)
        try push?.validate()
    }

    /// Checks a message's list of parts: 1 to 1,000, each valid, no duplicate part ids (the
    /// same rule for a new message and for a replacement of its parts).
    public static func validate(parts: [MessagePart]) throws(ModelError) {
        guard !parts.isEmpty else { throw ModelError(.noParts, "a message needs at least one part") }
        guard parts.count <= Limits.maxPartsPerMessage else {
            throw ModelError(
                .tooManyParts, "a message has at most \(Limits.maxPartsPerMessage) parts, this one has \(parts.count)")
        }
        var seen = Set<UUID>()
        for part in parts {
            try part.validate()
            guard seen.insert(part.id).inserted else {
                throw ModelError(.duplicatePart, "part \(part.id.uuidString.lowercased()) appears twice in one message")
            }
        }
    }
}

/// Property names used in object changes of messages.
public enum MessageProperty {
    public static let parts = "parts"
    public static let position = "position"
    public static let sentAt = "sentAt"
    public static let recipientStatus = "recipientStatus"
    public static let isSent = "isSent"
    public static let conversation = "conversation"
    public static let thread = "thread"
    public static let replyTo = "replyTo"
    public static let threadReplyCount = "threadReplyCount"
    public static let editedAt = "editedAt"
    /// The users a message mentions (SPEC §3.17); a query tests it with `contains` a user.
    public static let mentions = "mentions"
}
