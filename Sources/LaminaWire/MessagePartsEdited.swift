import Foundation
import LaminaMerge
import LaminaModel
import NIOCore

/// REPLICATE kind 74 (SPEC §6.5, §6.2): an edit of a message's parts as the per-part register
/// needs it (LaminaMerge's `MessagePartsMap`): the whole list at the origin after the edit
/// (whose order is the order register's write), which of its parts the edit set, and the ids it
/// removed, all at `at`. Sent to peers with feature bit 20; others get kind 11 with `parts`.
/// ```
/// +-----------------------+------------------+-----------------------+
/// | conversationID (uuid) | messageID (uuid) | parts (count + parts) |
/// +-----------------------+------------------+-----------------------+
/// | set (a bool per part) | removed (count + uuid, ascending) | by (user id) | at (hlc) |
/// +-----------------------+-----------------------------------+--------------+----------+
/// ```
public struct MessagePartsEdited: Hashable, Sendable {
    public var conversationID: ConversationID
    public var messageID: MessageID
    /// The whole list at the origin after the edit.
    public var parts: [MessagePart]
    /// The ids of the parts among `parts` this edit set (added or replaced).
    public var set: Set<UUID>
    /// The ids this edit removed (none of them among `parts`).
    public var removed: Set<UUID>
    public var by: UserID
    /// The edit's reading: the reading of every part it set or removed.
    public var at: HLCTimestamp

    public init(
        conversationID: ConversationID, messageID: MessageID, parts: [MessagePart], set: Set<UUID>,
        removed: Set<UUID>, by: UserID, at: HLCTimestamp
    ) {
        self.conversationID = conversationID
        self.messageID = messageID
        self.parts = parts
        self.set = set
        self.removed = removed
        self.by = by
        self.at = at
    }

    /// The REPLICATE event kind.
    public static let kind: UInt8 = 74

    /// The edit as the merge takes it.
    public var edit: MessagePartsEdit {
        MessagePartsEdit(
            at: at, set: parts.filter { set.contains($0.id) }, removed: Self.ascending(removed),
            order: parts.map(\.id))
    }

    /// What a peer without feature bit 20 gets: kind 11 with the whole list.
    public var wholeList: MessagePartsChanged {
        MessagePartsChanged(conversationID: conversationID, messageID: messageID, parts: parts, by: by, at: at)
    }

    static func ascending(_ ids: Set<UUID>) -> [UUID] {
        ids.sorted { a, b in
            withUnsafeBytes(of: a.uuid) { x in withUnsafeBytes(of: b.uuid) { y in x.lexicographicallyPrecedes(y) } }
        }
    }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        let ids = Set(parts.map(\.id))
        guard ids.count == parts.count, set.isSubset(of: ids), removed.isDisjoint(with: ids) else {
            throw WireError(
                .invalidArgument,
                "an edit's list names each part once, sets only parts of it and removes only parts not in it")
        }
        guard removed.count <= WireLimits.default.maxParts else {
            throw WireError(.tooManyParts, "an edit removes at most \(WireLimits.default.maxParts) parts")
        }
        b.writeInteger(Self.kind, as: UInt8.self)
        b.writeID(conversationID)
        b.writeID(messageID)
        try b.writeParts(parts)
        for part in parts { b.writeBool(set.contains(part.id)) }
        b.writeVarint(UInt64(removed.count))
        for id in Self.ascending(removed) { b.writeUUID(id) }
        try b.writeUserID(by)
        b.writeHLC(at)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> MessagePartsEdited {
        guard try b.readU8("the event kind") == kind else { throw WireError(.malformed, "not a part edit") }
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let message = try b.readID(MessageID.self, "the message id")
        let parts = try b.readParts(limits)
        // One flag per part id: a list naming an id twice has no single reading of its flag.
        guard Set(parts.map(\.id)).count == parts.count else {
            throw WireError(.duplicatePart, "a part edit's list names a part id twice")
        }
        var set = Set<UUID>()
        for part in parts {
            if try b.readBool("a part's set flag") { set.insert(part.id) }
        }
        let count = try b.readCount(
            max: limits.maxParts, minElementSize: 16, "a removed part count", code: .tooManyParts)
        var removed: [UUID] = []
        for _ in 0..<count { removed.append(try b.readUUID("a removed part id")) }
        guard ascending(Set(removed)) == removed else {
            throw WireError(.nonCanonical, "removed part ids must be in strictly ascending order")
        }
        guard Set(removed).isDisjoint(with: parts.map(\.id)) else {
            throw WireError(.malformed, "a part edit removes a part its list holds")
        }
        let by = try b.readUserID(limits)
        let at = try b.readHLC("the edit time")
        return MessagePartsEdited(
            conversationID: conversation, messageID: message, parts: parts, set: set, removed: Set(removed), by: by,
            at: at)
    }
}

extension ReplicatedOperation {
    /// The operation as a peer without per-part edits (its PEER_HELLO lacks bit 20) reads it: a
    /// part edit as kind 11 with the whole list it left at its origin.
    public var withWholePartLists: ReplicatedOperation {
        guard case .partsEdited(let edit) = payload else { return self }
        var out = self
        out.payload = .change(.messagePartsChanged(edit.wholeList))
        return out
    }
}
