import Foundation
import GRDB
import LaminaModel
import LaminaWire

/// A channel this device holds (SPEC §6.8): one the user joined (or left: kept with
/// `isMember` false until the channel is deleted), with the device's cursor in the channel's
/// log (the highest `logSeq` up to which it holds every message).
public struct StoredChannel: Hashable, Sendable, Identifiable {
    public var channel: ChatChannel
    public var isMember: Bool
    /// The device's channel cursor: every message of the log up to it is stored here.
    public var cursor: UInt64

    public var id: ChannelID { channel.id }
}

/// A channel message this device holds (no recipient status, no unread state: SPEC §6.8).
public struct StoredChannelMessage: Hashable, Sendable, Identifiable {
    public var message: ChannelMessage
    /// The local state of each part, in the order of `message.parts`: rich content downloads
    /// (on request or by the content settings) as a conversation message's does.
    public var partStates: [PartState]
    public var id: MessageID { message.id }
}

/// The names of the properties a query over channels or channel messages may name.
public enum ChannelProperty {
    public static let identifier = "identifier"
    public static let name = "name"
    public static let creator = "creator"
    public static let createdAt = "createdAt"
    public static let isMember = "isMember"
}

/// The names of the properties a query over channel messages may name.
public enum ChannelMessageProperty {
    public static let identifier = "identifier"
    public static let channel = "channel"
    public static let sender = "sender"
    public static let sentAt = "sentAt"
    public static let position = "position"
    public static let logSeq = "logSeq"
    /// The parts; a query controller reports an update of it when a part's local state moves.
    public static let parts = "parts"
}

extension StoredChannel: QueryableObject {
    public static var queryTarget: QueryTarget { .channels }
    public static func load(_ row: QueryRow) throws -> StoredChannel { try StoredChannels.channel(row.row) }
    public static let updatableProperties: Set<String> = [ChannelProperty.isMember]
    public func changedProperties(since old: StoredChannel) -> Set<String> {
        isMember != old.isMember ? [ChannelProperty.isMember] : []
    }
}

extension StoredChannelMessage: QueryableObject {
    public static var queryTarget: QueryTarget { .channelMessages }
    public static func load(_ row: QueryRow) throws -> StoredChannelMessage {
        try StoredChannels.message(row.db, row.row)
    }
    public static let updatableProperties: Set<String> = [ChannelMessageProperty.parts]
    /// A part's local state (its transfer) counts as a change of `parts`.
    public func changedProperties(since old: StoredChannelMessage) -> Set<String> {
        partStates != old.partStates ? [ChannelMessageProperty.parts] : []
    }
}

/// The channel tables of the local store (migration `v10-channels`) and their rows; a channel
/// message's parts also have rows in `part` (migration `v13-channel-content`, ChannelPartSchema).
enum StoredChannels {
    static let schema = """
        CREATE TABLE channel (
            id BLOB NOT NULL UNIQUE,
            name TEXT NOT NULL,
            creator TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            is_member INTEGER NOT NULL DEFAULT 1,
            log_cursor INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE channel_message (
            id BLOB NOT NULL UNIQUE,
            channel_id BLOB NOT NULL REFERENCES channel(id) ON DELETE CASCADE,
            log_seq INTEGER NOT NULL,
            sender TEXT NOT NULL,
            sent_at INTEGER NOT NULL,
            pos_physical INTEGER NOT NULL,
            pos_logical INTEGER NOT NULL,
            pos_node INTEGER NOT NULL,
            parts BLOB NOT NULL
        );
        CREATE INDEX channel_message_log ON channel_message(channel_id, log_seq);
        """

    static func channel(_ row: Row) throws -> StoredChannel {
        let raw: String = row["name"]
        let creator: String = row["creator"]
        let channel = ChatChannel(
            id: ChannelID(uuid: try StoreCoding.uuid(row, "id")), name: try ChannelName(raw),
            creator: try UserID(creator), createdAt: Timestamp(millisecondsSince1970: row["created_at"]))
        let cursor: Int64 = row["log_cursor"]
        return StoredChannel(channel: channel, isMember: row["is_member"], cursor: UInt64(max(0, cursor)))
    }

    static func message(_ db: Database, _ row: Row) throws -> StoredChannelMessage {
        let sender: String = row["sender"]
        let parts: Data = row["parts"]
        guard
            let position = try StoreCoding.position(
                physical: row["pos_physical"], logical: row["pos_logical"], node: row["pos_node"])
        else { throw ClientError(.corruptRecord, "a channel message has no position") }
        let seq: Int64 = row["log_seq"]
        let message = ChannelMessage(
            id: MessageID(uuid: try StoreCoding.uuid(row, "id")),
            channelID: ChannelID(uuid: try StoreCoding.uuid(row, "channel_id")), sender: try UserID(sender),
            sentAt: Timestamp(millisecondsSince1970: row["sent_at"]), position: position,
            logSeq: UInt64(max(0, seq)), parts: try MessageBodyCoding.decode(parts).parts)
        return StoredChannelMessage(message: message, partStates: try partStates(db, message))
    }

    /// The local state of each of `message`'s parts, from its `part` rows (a part without one,
    /// of a message stored before `v13-channel-content`, is inline: complete).
    static func partStates(_ db: Database, _ message: ChannelMessage) throws -> [PartState] {
        var stored: [UUID: PartState] = [:]
        for p in try Row.fetchAll(
            db.cachedStatement(
                sql:
                    "SELECT part_id, transfer_status, local_path, last_access, auto_downloaded, purged FROM part WHERE message_id = ?"
            ), arguments: [StoreCoding.blob(message.id)])
        {
            let partID = try StoreCoding.uuid(p, "part_id")
            guard let status = TransferStatus(rawValue: p["transfer_status"]) else {
                throw ClientError(.corruptRecord, "part \(partID) has an unknown transfer status")
            }
            stored[partID] = PartState(
                partID: partID, transferStatus: status, localPath: p["local_path"],
                lastAccess: (p["last_access"] as Int64?).map(Timestamp.init(millisecondsSince1970:)),
                autoDownloaded: p["auto_downloaded"], purged: p["purged"])
        }
        return message.parts.map { part in stored[part.id] ?? WriteContext.remoteState(of: part) }
    }

    static func channel(_ db: Database, _ id: ChannelID) throws -> StoredChannel? {
        try Row.fetchOne(db, sql: "SELECT * FROM channel WHERE id = ?", arguments: [StoreCoding.blob(id)]).map(
            channel)
    }
}

extension WriteContext {
    /// A channel the user joined (`channel-created`, then `channel-membership-changed`): stored,
    /// or marked a member again.
    func applyChannel(_ channel: ChatChannel) throws {
        if var stored = try StoredChannels.channel(db, channel.id) {
            guard !stored.isMember else { return }
            try applyChannelMembership(channel.id, isMember: true, existing: &stored)
            return
        }
        try db.execute(
            sql: "INSERT INTO channel (id, name, creator, created_at) VALUES (?, ?, ?, ?)",
            arguments: [
                StoreCoding.blob(channel.id), channel.name.rawValue, channel.creator.rawValue,
                channel.createdAt.millisecondsSince1970,
            ])
        record(ObjectChange(type: .create, object: .channel(channel)))
    }

    /// The local user joined or left `id` (a channel not held is left alone: it arrives with
    /// its `channel-created`).
    func applyChannelMembership(_ id: ChannelID, isMember: Bool) throws {
        guard var stored = try StoredChannels.channel(db, id), stored.isMember != isMember else { return }
        try applyChannelMembership(id, isMember: isMember, existing: &stored)
    }

    private func applyChannelMembership(_ id: ChannelID, isMember: Bool, existing stored: inout StoredChannel) throws {
        try db.execute(
            sql: "UPDATE channel SET is_member = ? WHERE id = ?", arguments: [isMember, StoreCoding.blob(id)])
        record(
            ObjectChange(
                type: .update, object: .channel(stored.channel), property: ChannelProperty.isMember,
                before: .bool(stored.isMember), after: .bool(isMember)))
        stored.isMember = isMember
    }

    /// The channel and its messages are gone (their parts' files with them).
    func deleteChannel(_ id: ChannelID) throws {
        guard let stored = try StoredChannels.channel(db, id) else { return }
        for path in try String.fetchAll(
            db,
            sql: """
                SELECT part.local_path FROM channel_message JOIN part ON part.message_id = channel_message.id
                WHERE channel_message.channel_id = ? AND part.local_path IS NOT NULL
                """, arguments: [StoreCoding.blob(id)])
        {
            retire(localPath: path)
        }
        try db.execute(sql: "DELETE FROM channel WHERE id = ?", arguments: [StoreCoding.blob(id)])
        record(ObjectChange(type: .delete, object: .channel(stored.channel)))
    }

    /// A channel message (live or fetched): stored once; the channel's cursor moves over every
    /// message now held without a gap after it. A message of a channel not held is dropped.
    func applyChannelMessage(_ message: ChannelMessage) throws {
        guard let stored = try StoredChannels.channel(db, message.channelID) else { return }
        let exists =
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM channel_message WHERE id = ?)",
                arguments: [StoreCoding.blob(message.id)]) ?? false
        if !exists {
            let (pp, pl, pn) = StoreCoding.positionColumns(message.position)
            try db.execute(
                sql: """
                    INSERT INTO channel_message (id, channel_id, log_seq, sender, sent_at, pos_physical, pos_logical, pos_node, parts)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    StoreCoding.blob(message.id), StoreCoding.blob(message.channelID), Int64(message.logSeq),
                    message.sender.rawValue, message.sentAt.millisecondsSince1970, pp, pl, pn,
                    Data(try MessageBodyCoding.encode(parts: message.parts, push: nil)),
                ])
            try insertChannelParts(of: message)
            record(ObjectChange(type: .create, object: .channelMessage(message)))
        }
        var cursor = stored.cursor
        while message.logSeq > cursor,
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM channel_message WHERE channel_id = ? AND log_seq = ?)",
                arguments: [StoreCoding.blob(message.channelID), Int64(cursor + 1)]) ?? false
        {
            cursor += 1
        }
        if cursor != stored.cursor {
            try db.execute(
                sql: "UPDATE channel SET log_cursor = ? WHERE id = ?",
                arguments: [Int64(cursor), StoreCoding.blob(message.channelID)])
        }
    }

    /// One `part` row per part of a new channel message: inline parts complete, rich content
    /// ready for download (the content manager's auto-download rules then apply), or complete
    /// when its file is here already (the sender's own upload). A row whose key is taken
    /// already (a conversation message's part of the same ids) is left as it is.
    private func insertChannelParts(of message: ChannelMessage) throws {
        for (index, part) in message.parts.enumerated() {
            var inline: Data?
            var contentID: Data?
            var size: Int64?
            var sha: Data?
            var status = Self.remoteState(of: part).transferStatus
            var localPath: String?
            switch part.content {
            case .inline(let bytes): inline = Data(bytes)
            case .external(let reference):
                contentID = StoreCoding.blob(reference.id)
                size = Int64(clamping: reference.size)
                sha = Data(reference.sha256)
                let name = LocalStore.contentFileName(MessagePartID(message: message.id, part: part.id))
                let held =
                    (try? FileManager.default.attributesOfItem(
                        atPath: contentDirectory.appendingPathComponent(name).path)[.size] as? NSNumber)?.uint64Value
                if held == reference.size {
                    status = .complete
                    localPath = name
                }
            }
            try db.execute(
                sql: """
                    INSERT OR IGNORE INTO part(message_id, idx, part_id, mime_type, inline_bytes, content_id, content_size,
                                               content_sha256, transfer_status, local_path, local_size, last_access)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    StoreCoding.blob(message.id), index, StoreCoding.blob(part.id), part.mimeType.rawValue, inline,
                    contentID, size, sha, status.rawValue, localPath, localPath == nil ? 0 : size,
                    localPath == nil ? nil : Timestamp.now().millisecondsSince1970,
                ])
        }
    }
}

extension LocalStore {
    /// The channels this device holds (joined, or left and not deleted), by id.
    public func channels() throws(ClientError) -> [StoredChannel] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM channel ORDER BY id").map(StoredChannels.channel) }
    }

    /// As ``channels()``, through GRDB's async API.
    func channelsAsync() async throws(ClientError) -> [StoredChannel] {
        try await readAsync { db in
            try Row.fetchAll(db, sql: "SELECT * FROM channel ORDER BY id").map(StoredChannels.channel)
        }
    }

    /// The channel `id`, when held.
    public func channel(_ id: ChannelID) throws(ClientError) -> StoredChannel? {
        try read { db in try StoredChannels.channel(db, id) }
    }

    /// As ``channel(_:)``, through GRDB's async API.
    func channelAsync(_ id: ChannelID) async throws(ClientError) -> StoredChannel? {
        try await readAsync { db in try StoredChannels.channel(db, id) }
    }

    /// The messages held of channel `id`, in log order.
    public func channelMessages(of id: ChannelID) throws(ClientError) -> [StoredChannelMessage] {
        try read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM channel_message WHERE channel_id = ? ORDER BY log_seq",
                arguments: [StoreCoding.blob(id)]
            ).map { row in try StoredChannels.message(db, row) }
        }
    }
}
