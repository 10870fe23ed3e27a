import Foundation
import LaminaModel
import NIOCore

// Encodings of the model's values (SPEC §3.9-§3.14). Domain rules that the codec can check
// cheaply fail with the model's own code (SPEC §3.15); other limits with `limit-exceeded`.

extension ByteBuffer {
    // MARK: User ids (SPEC §3.9)

    @inline(__always)
    mutating func writeUserID(_ user: UserID) throws(WireError) {
        try writeString(user.rawValue, max: WireLimits.default.maxUserIDBytes, "a user id", code: .invalidUserID)
    }

    /// A set of user ids: count, then the ids in ascending UTF-8 byte order, no duplicates (SPEC §3.9).
    mutating func writeUserSet(_ users: Set<UserID>) throws(WireError) {
        guard users.count <= WireLimits.default.maxParticipants else {
            throw WireError(
                .tooManyParticipants,
                "a participant list has at most \(WireLimits.default.maxParticipants) users, this one has \(users.count)"
            )
        }
        writeVarint(UInt64(users.count))
        for user in users.sorted() { try writeUserID(user) }
    }

    // MARK: Timestamps and clocks (SPEC §3.10)

    @inline(__always)
    mutating func writeTimestamp(_ t: Timestamp) { writeSignedVarint(t.millisecondsSince1970) }

    /// ```
    /// +-------------------+------------------+------------------+
    /// | physical (varint) | logical (varint) | node (u64, BE)   |
    /// +-------------------+------------------+------------------+
    /// ```
    @inline(__always)
    mutating func writeHLC(_ h: HLCTimestamp) {
        writeVarint(h.physical)
        writeVarint(UInt64(h.logical))
        writeInteger(h.node.rawValue, as: UInt64.self)
    }

    // MARK: Identifiers (SPEC §3.4)

    @inline(__always) mutating func writeID<ID: LaminaIdentifier>(_ id: ID) { writeUUID(id.uuid) }

    // MARK: Enumerations (SPEC §3.11)

    // MARK: Message parts (SPEC §3.12)

    /// ```
    /// +-----------+-----------+----------+------------------------------------------+
    /// | id (16)   | MIME type | kind(u8) | 0: length (varint) + bytes (<= 2048)     |
    /// |           | (string)  |          | 1: content id (16) + size (varint) +     |
    /// |           |           |          |    sha256 (32)                           |
    /// +-----------+-----------+----------+------------------------------------------+
    /// ```
    mutating func writePart(_ part: MessagePart) throws(WireError) {
        writeUUID(part.id)
        try writeString(
            part.mimeType.rawValue, max: WireLimits.default.maxMIMETypeBytes, "a MIME type", code: .invalidMIMEType)
        switch part.content {
        case .inline(let bytes):
            guard bytes.count <= WireLimits.default.maxInlinePartBytes else {
                throw WireError(
                    .inlineTooLarge,
                    "an inline part is at most \(WireLimits.default.maxInlinePartBytes) bytes, this one has \(bytes.count)"
                )
            }
            writeInteger(0, as: UInt8.self)
            writeLengthPrefixedBytes(bytes)
        case .external(let ref):
            guard ref.size <= Limits.maxPartBytes else {
                throw WireError(
                    .partTooLarge, "a part is at most \(Limits.maxPartBytes) bytes, this one has \(ref.size)")
            }
            guard ref.sha256.count == 32 else {
                throw WireError(
                    .invalidContentReference,
                    "a content reference carries a 32-byte SHA-256, this one has \(ref.sha256.count)")
            }
            writeInteger(1, as: UInt8.self)
            writeID(ref.id)
            writeVarint(ref.size)
            writeBytes(ref.sha256)
        }
    }

    /// Parts: count (1...1000), then each part (SPEC §3.12).
    mutating func writeParts(_ parts: [MessagePart]) throws(WireError) {
        guard !parts.isEmpty else { throw WireError(.noParts, "a message needs at least one part") }
        guard parts.count <= WireLimits.default.maxParts else {
            throw WireError(
                .tooManyParts, "a message has at most \(WireLimits.default.maxParts) parts, this one has \(parts.count)"
            )
        }
        writeVarint(UInt64(parts.count))
        for part in parts { try writePart(part) }
    }

    // MARK: Push configuration (SPEC §3.13)

    mutating func writePush(_ push: PushConfiguration) throws(WireError) {
        let limits = WireLimits.default
        for s in [push.alert, push.sound, push.title, push.category] {
            if let s {
                writeInteger(1, as: UInt8.self)
                try writeString(s, max: limits.maxTextBytes, "a push string", code: .invalidPushConfiguration)
            } else {
                writeInteger(0, as: UInt8.self)
            }
        }
        guard push.data.count <= limits.maxPushDataEntries else {
            throw WireError(
                .invalidPushConfiguration,
                "push data has at most \(limits.maxPushDataEntries) entries, this one has \(push.data.count)")
        }
        writeVarint(UInt64(push.data.count))
        for key in push.data.keys.sorted(by: utf8Less) {
            try writeString(key, max: limits.maxTextBytes, "a push data key", code: .invalidPushConfiguration)
            try writeString(
                push.data[key] ?? "", max: limits.maxTextBytes, "a push data value", code: .invalidPushConfiguration)
        }
    }

    // MARK: Metadata (SPEC §3.14)

    /// A map: count, then entries in strictly ascending key order; each entry is a key
    /// (string), a kind (0 string, 1 map) and the value. The top-level map is level 1.
    mutating func writeMetadataMap(_ map: [String: MetadataValue], level: Int) throws(WireError) {
        let limits = WireLimits.default
        guard level <= limits.maxMetadataDepth else {
            throw WireError(.invalidMetadata, "metadata nests at most \(limits.maxMetadataDepth) levels deep")
        }
        guard map.count <= limits.maxMetadataEntries else {
            throw WireError(
                .invalidMetadata,
                "a metadata map has at most \(limits.maxMetadataEntries) entries, this one has \(map.count)")
        }
        writeVarint(UInt64(map.count))
        for key in map.keys.sorted(by: utf8Less) {
            try PayloadReader.checkMetadataKey(key, limits)
            try writeString(key, max: limits.maxMetadataKeyBytes, "a metadata key", code: .invalidMetadata)
            // The key came from the map itself.
            guard let value = map[key] else { continue }
            try writeMetadataValue(value, level: level)
        }
    }

    /// A value at `level`: kind byte, then a string or a map one level further down.
    mutating func writeMetadataValue(_ value: MetadataValue, level: Int) throws(WireError) {
        switch value {
        case .string(let s):
            writeInteger(0, as: UInt8.self)
            try writeString(
                s, max: WireLimits.default.maxMetadataValueBytes, "a metadata value", code: .invalidMetadata)
        case .dictionary(let d):
            writeInteger(1, as: UInt8.self)
            try writeMetadataMap(d, level: level + 1)
        }
    }

    /// A key path: count (1...8), then the keys (SPEC §3.14).
    mutating func writeKeyPath(_ path: MetadataKeyPath) throws(WireError) {
        writeVarint(UInt64(path.components.count))
        for key in path.components {
            try writeString(key, max: WireLimits.default.maxMetadataKeyBytes, "a metadata key", code: .invalidMetadata)
        }
    }

    // MARK: Conversations (SPEC §3.16)

    /// ```
    /// +--------+---------+------------+----------+----------+--------------+----------+
    /// | id(16) | creator | created at | distinct | receipts | participants | metadata |
    /// |        | (user)  | (svarint)  | (bool)   | (u8)     | (user set)   | (map)    |
    /// +--------+---------+------------+----------+----------+--------------+----------+
    /// ```
    mutating func writeConversation(_ c: Conversation) throws(WireError) {
        writeID(c.id)
        try writeUserID(c.creator)
        writeTimestamp(c.createdAt)
        writeBool(c.isDistinct)
        writeReceipts(c.receiptSwitches)
        try writeUserSet(c.participants)
        try writeMetadataMap(c.metadata.values, level: 1)
    }

    // MARK: Messages (SPEC §3.17)

    /// ```
    /// +--------+--------------+--------+------------+------------+-------+--------+------------------+
    /// | id(16) | conversation | sender | sent at    | position   | parts | push   | recipient status |
    /// |        | id (16)      | (user) | (opt svar) | (opt HLC)  |       | (opt)  | (map user -> i8) |
    /// +--------+--------------+--------+------------+------------+-------+--------+------------------+
    /// ```
    mutating func writeMessage(_ m: Message) throws(WireError) {
        var none: [UserID: Int]? = nil
        try writeMessage(m, statusOffsets: &none)
    }

    /// ``writeMessage(_:)``, noting in `statusOffsets` (when not nil) the writer index of each
    /// user's status byte.
    mutating func writeMessage(_ m: Message, statusOffsets: inout [UserID: Int]?) throws(WireError) {
        writeID(m.id)
        writeID(m.conversationID)
        try writeUserID(m.sender)
        if let sentAt = m.sentAt {
            writeInteger(1, as: UInt8.self)
            writeTimestamp(sentAt)
        } else {
            writeInteger(0, as: UInt8.self)
        }
        if let position = m.position {
            writeInteger(1, as: UInt8.self)
            writeHLC(position)
        } else {
            writeInteger(0, as: UInt8.self)
        }
        try writeParts(m.parts)
        try writeMessageTrailer(push: m.push, mentions: m.mentions)
        guard m.recipientStatus.count <= WireLimits.default.maxParticipants else {
            throw WireError(
                .tooManyParticipants, "recipient status has at most \(WireLimits.default.maxParticipants) entries")
        }
        writeVarint(UInt64(m.recipientStatus.count))
        for user in m.recipientStatus.keys.sorted() {
            try writeUserID(user)
            if statusOffsets != nil { statusOffsets?[user] = writerIndex }
            writeInteger(UInt8(bitPattern: m.recipientStatus[user]?.rawValue ?? -1), as: UInt8.self)
        }
    }

}

extension PayloadReader {
    @inline(__always)
    mutating func readUserID(_ limits: WireLimits) throws(WireError) -> UserID {
        let raw = try readString(max: limits.maxUserIDBytes, "a user id", code: .invalidUserID)
        do { return try UserID(raw) } catch { throw WireError(error) }
    }

    mutating func readUserSet(_ limits: WireLimits) throws(WireError) -> Set<UserID> {
        let count = try readCount(
            max: limits.maxParticipants, minElementSize: 1, "a participant count", code: .tooManyParticipants)
        var users = Set<UserID>(minimumCapacity: count)
        var previous: UserID?
        for _ in 0..<count {
            let user = try readUserID(limits)
            // SPEC §3.7: "A set of strings (user ids) and a map keyed by strings (metadata, push data, recipient status) are written in strictly ascending order of the keys' UTF-8 bytes".
            if let previous, !(previous < user) {
                throw WireError(.nonCanonical, "user ids of a set must be in strictly ascending byte order")
            }
            guard users.insert(user).inserted else {
                throw WireError(.nonCanonical, "two user ids of a set are canonically equivalent strings")
            }
            previous = user
        }
        return users
    }

    @inline(__always)
    mutating func readTimestamp(_ what: StaticString) throws(WireError) -> Timestamp {
        Timestamp(millisecondsSince1970: try readSignedVarint(what))
    }

    @inline(__always)
    mutating func readHLC(_ what: StaticString) throws(WireError) -> HLCTimestamp {
        let start = readerIndex
        do {
            let physical = try readVarint(what)
            let logical = try readVarint32(what)
            let node = try readU64(what)
            return HLCTimestamp(physical: physical, logical: logical, node: NodeID(node))
        } catch {
            moveReaderIndex(to: start)
            throw error
        }
    }

    @inline(__always)
    mutating func readID<ID: LaminaIdentifier>(_ type: ID.Type, _ what: StaticString) throws(WireError) -> ID {
        ID(uuid: try readUUID(what))
    }

    mutating func readDeletionMode() throws(WireError) -> DeletionMode {
        let raw = try peekU8("a deletion mode")
        guard let mode = DeletionMode(rawValue: raw) else {
            throw WireError(.malformed, "deletion mode \(raw) is not 1 (my devices) or 2 (all participants)")
        }
        moveReaderIndex(forwardBy: 1)
        return mode
    }

    mutating func readRecipientStatus() throws(WireError) -> RecipientStatus {
        let raw = try peekU8("a recipient status")
        guard let status = RecipientStatus(rawValue: Int8(bitPattern: raw)) else {
            throw WireError(.malformed, "recipient status \(Int8(bitPattern: raw)) is not one of -1...3")
        }
        moveReaderIndex(forwardBy: 1)
        return status
    }

    mutating func readPart(_ limits: WireLimits) throws(WireError) -> MessagePart {
        let id = try readUUID("a part id")
        let mimeType: MIMEType
        if peekStringEquals("text/plain") {
            moveReaderIndex(forwardBy: 11)
            mimeType = .textPlain
        } else {
            let raw = try readString(max: limits.maxMIMETypeBytes, "a MIME type", code: .invalidMIMEType)
            do { mimeType = try MIMEType(raw) } catch { throw WireError(error) }
        }
        let kind = try readU8("a part kind")
        switch kind {
        case 0:
            let length = try readCount(max: limits.maxInlinePartBytes, "an inline part's length", code: .inlineTooLarge)
            guard let bytes = readBytes(length: length) else {
                throw WireError(.truncated, "the payload ends inside an inline part")
            }
            return MessagePart(id: id, mimeType: mimeType, content: .inline(bytes))
        case 1:
            let contentID = try readID(ContentID.self, "a content id")
            let size = try readVarint("a content size")
            guard size <= Limits.maxPartBytes else {
                throw WireError(
                    .partTooLarge, "a part is at most \(Limits.maxPartBytes) bytes, this one declares \(size)")
            }
            guard let sha = readBytes(length: 32) else {
                throw WireError(.truncated, "the payload ends inside a SHA-256")
            }
            return MessagePart(
                id: id, mimeType: mimeType, content: .external(ContentReference(id: contentID, size: size, sha256: sha))
            )
        default:
            throw WireError(.malformed, "part kind \(kind) is not 0 (inline) or 1 (content reference)")
        }
    }

    mutating func readParts(_ limits: WireLimits) throws(WireError) -> [MessagePart] {
        // A part takes at least 19 bytes: id (16), MIME length (1, the string may not be empty
        // to be valid but is checked later), kind (1), inline length (1).
        let count = try readCount(max: limits.maxParts, minElementSize: 19, "a part count", code: .tooManyParts)
        guard count > 0 else { throw WireError(.noParts, "a message needs at least one part") }
        var parts = [MessagePart]()
        parts.reserveCapacity(count)
        for _ in 0..<count { parts.append(try readPart(limits)) }
        return parts
    }

    mutating func readPush(_ limits: WireLimits) throws(WireError) -> PushConfiguration {
        var strings: (String?, String?, String?, String?) = (nil, nil, nil, nil)
        for i in 0..<4 {
            guard try readPresence("a push string") else { continue }
            let s = try readString(max: limits.maxTextBytes, "a push string", code: .invalidPushConfiguration)
            switch i {
            case 0: strings.0 = s
            case 1: strings.1 = s
            case 2: strings.2 = s
            default: strings.3 = s
            }
        }
        let count = try readCount(
            max: limits.maxPushDataEntries, minElementSize: 2, "a push data count", code: .invalidPushConfiguration)
        var data = [String: String](minimumCapacity: count)
        var previous: String?
        for _ in 0..<count {
            let key = try readString(max: limits.maxTextBytes, "a push data key", code: .invalidPushConfiguration)
            let value = try readString(max: limits.maxTextBytes, "a push data value", code: .invalidPushConfiguration)
            if let previous, !utf8Less(previous, key) {
                throw WireError(.nonCanonical, "push data keys must be in strictly ascending byte order")
            }
            guard data.updateValue(value, forKey: key) == nil else {
                throw WireError(.nonCanonical, "two push data keys are canonically equivalent strings")
            }
            previous = key
        }
        return PushConfiguration(alert: strings.0, sound: strings.1, title: strings.2, category: strings.3, data: data)
    }

    mutating func readMetadataMap(level: Int, _ limits: WireLimits) throws(WireError) -> [String: MetadataValue] {
        // SPEC §3.14: "Maps nest at most 8 levels deep (the top-level map is level 1)."
        guard level <= limits.maxMetadataDepth else {
            throw WireError(.invalidMetadata, "metadata nests at most \(limits.maxMetadataDepth) levels deep")
        }
        let count = try readCount(
            max: limits.maxMetadataEntries, minElementSize: 3, "a metadata map's entry count", code: .invalidMetadata)
        var map = [String: MetadataValue](minimumCapacity: count)
        var previous: String?
        for _ in 0..<count {
            let key = try readString(max: limits.maxMetadataKeyBytes, "a metadata key", code: .invalidMetadata)
            try PayloadReader.checkMetadataKey(key, limits)
            if let previous, !utf8Less(previous, key) {
                throw WireError(.nonCanonical, "metadata keys must be in strictly ascending byte order")
            }
            let value = try readMetadataValue(level: level, limits)
            guard map.updateValue(value, forKey: key) == nil else {
                throw WireError(.nonCanonical, "two metadata keys are canonically equivalent strings")
            }
            previous = key
        }
        return map
    }

    mutating func readMetadataValue(level: Int, _ limits: WireLimits) throws(WireError) -> MetadataValue {
        let kind = try readU8("a metadata value kind")
        switch kind {
        case 0:
            return .string(
                try readString(max: limits.maxMetadataValueBytes, "a metadata value", code: .invalidMetadata))
        case 1: return .dictionary(try readMetadataMap(level: level + 1, limits))
        default: throw WireError(.malformed, "metadata value kind \(kind) is not 0 (string) or 1 (map)")
        }
    }

    static func checkMetadataKey(_ key: String, _ limits: WireLimits) throws(WireError) {
        // SPEC §3.14: "A key is 1 to 128 UTF-8 bytes and contains no `.` (0x2E)".
        guard !key.isEmpty, !key.utf8.contains(UInt8(ascii: ".")) else {
            throw WireError(.invalidMetadata, "a metadata key must be non-empty and contain no '.'")
        }
    }

    mutating func readKeyPath(_ limits: WireLimits) throws(WireError) -> MetadataKeyPath {
        let count = try readCount(
            max: limits.maxMetadataDepth, minElementSize: 1, "a key path's length", code: .invalidMetadata)
        var components = [String]()
        components.reserveCapacity(count)
        for _ in 0..<count {
            components.append(try readString(max: limits.maxMetadataKeyBytes, "a metadata key", code: .invalidMetadata))
        }
        do { return try MetadataKeyPath(components) } catch { throw WireError(error) }
    }

    mutating func readConversation(_ limits: WireLimits) throws(WireError) -> Conversation {
        let id = try readID(ConversationID.self, "a conversation id")
        let creator = try readUserID(limits)
        let createdAt = try readTimestamp("a creation time")
        let distinct = try readBool("the distinct flag")
        let receipts = try readReceipts()
        let participants = try readUserSet(limits)
        let metadata = try readMetadataMap(level: 1, limits)
        return Conversation(
            id: id, participants: participants, isDistinct: distinct, metadata: Metadata(metadata),
            deliveryReceiptsEnabled: receipts.delivery, readReceiptsEnabled: receipts.read, createdAt: createdAt,
            creator: creator
        )
    }

    mutating func readMessage(_ limits: WireLimits) throws(WireError) -> Message {
        let id = try readID(MessageID.self, "a message id")
        let conversationID = try readID(ConversationID.self, "a conversation id")
        let sender = try readUserID(limits)
        let sentAt = try readPresence("sent at") ? try readTimestamp("sent at") : nil
        let position = try readPresence("a position") ? try readHLC("a position") : nil
        let parts = try readParts(limits)
        let (push, mentions) = try readMessageTrailer(limits)
        let count = try readCount(
            max: limits.maxParticipants, minElementSize: 2, "a recipient status count", code: .tooManyParticipants)
        var statuses = [UserID: RecipientStatus](minimumCapacity: count)
        var previous: UserID?
        for _ in 0..<count {
            let user = try readUserID(limits)
            let status = try readRecipientStatus()
            if let previous, !(previous < user) {
                throw WireError(.nonCanonical, "recipient status entries must be in strictly ascending user id order")
            }
            guard statuses.updateValue(status, forKey: user) == nil else {
                throw WireError(.nonCanonical, "two recipient status user ids are canonically equivalent strings")
            }
            previous = user
        }
        return Message(
            id: id, conversationID: conversationID, sender: sender, parts: parts, sentAt: sentAt,
            position: position, push: push, recipientStatus: statuses, mentions: mentions
        )
    }
}
