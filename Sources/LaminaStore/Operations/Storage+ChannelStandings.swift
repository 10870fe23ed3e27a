import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

/// A user's standing in a channel as stored (SPEC §6.8): their latest join or leave and its HLC
/// reading, kept after a leave so a peer's older operation about them loses to it.
package struct StoredChannelStanding: Hashable, Sendable {
    package var isMember: Bool
    package var at: HLCTimestamp

    package init(isMember: Bool, at: HLCTimestamp) {
        self.isMember = isMember
        self.at = at
    }
}

extension StorageReader {
    /// `user`'s standing in `channel`, nil when they never joined or left it (or it was deleted).
    package func channelStanding(of user: UserID, in channel: ChannelID) throws(StorageError)
        -> StoredChannelStanding?
    {
        guard
            let row = try db.row(
                """
                SELECT is_member, at_physical, at_logical, at_node FROM channel_standings
                WHERE channel_id = ? AND member = ?
                """, [Columns.blob(channel.uuid), user.rawValue])
        else { return nil }
        return StoredChannelStanding(isMember: row.int64(0) != 0, at: try Columns.hlc(row, from: 1))
    }
}

extension StorageTransaction {
    /// Records `user`'s standing in `channel` (the caller decided it wins, by LaminaMerge's
    /// `ChannelMembership`); the member rows and count are moved separately.
    package func setChannelStanding(_ standing: StoredChannelStanding, of user: UserID, in channel: ChannelID)
        throws(StorageError)
    {
        let (p, l, n) = try Columns.hlc(standing.at)
        try db.run(
            """
            INSERT INTO channel_standings (channel_id, member, is_member, at_physical, at_logical, at_node)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (channel_id, member) DO UPDATE SET is_member = excluded.is_member,
                at_physical = excluded.at_physical, at_logical = excluded.at_logical, at_node = excluded.at_node
            """,
            [Columns.blob(channel.uuid), user.rawValue, standing.isMember ? 1 : 0, p, l, n])
    }

    /// Applies a join or leave of `user` (this node's command or a peer's operation) to the
    /// live `channel` through LaminaMerge's `ChannelMembership` (a later reading wins, a leave at
    /// the same reading): records the winning standing, and moves the member row and count when
    /// the user's membership changed. Returns whether it changed; applying an operation again,
    /// or one older than the standing held, changes nothing.
    package func applyChannelMembership(
        _ user: UserID, joined: Bool, at hlc: HLCTimestamp, in channel: ChannelID, now: Timestamp
    ) throws(StorageError) -> Bool {
        let held = try read.channelStanding(of: user, in: channel)
        var membership = ChannelMembership()
        if let held { membership.apply(held.isMember ? .joined(user, at: held.at) : .left(user, at: held.at)) }
        let wasMember = membership.isMember(user)
        membership.apply(joined ? .joined(user, at: hlc) : .left(user, at: hlc))
        guard let standing = membership.standings[user],
            standing.at != held?.at || standing.isMember != held?.isMember
        else { return false }
        try setChannelStanding(
            StoredChannelStanding(isMember: standing.isMember, at: standing.at), of: user, in: channel)
        guard standing.isMember != wasMember else { return false }
        if standing.isMember {
            return try addChannelMember(user, to: channel, at: now)
        }
        return try removeChannelMember(user, from: channel)
    }

    /// Stores a channel a peer created, with no member (its creator's join is an operation of
    /// its own). Its name may be one a live channel holds here (SPEC §6.8: concurrent creations
    /// on two peers). False when the id is held already (nothing written).
    package func insertReplicatedChannel(_ channel: ChatChannel) throws(StorageError) -> Bool {
        try db.run(
            """
            INSERT INTO channels (id, name, creator, created_at, replicated) VALUES (?, ?, ?, ?, 1)
            ON CONFLICT DO NOTHING
            """,
            [
                Columns.blob(channel.id.uuid), channel.name.rawValue, channel.creator.rawValue,
                channel.createdAt.millisecondsSince1970,
            ])
        return db.changesCount == 1
    }
}

extension StorageReader {
    /// The replicated state of every channel as text, equal on nodes that hold the same
    /// operations (SPEC §6.5's convergence check): each channel (id, name, creator, creation
    /// time, deleted), then, while it lives, each user's standing and each message (id,
    /// sender, time, position, body) in position order. What each node numbers or stamps
    /// itself (`log_seq`, `joined_at`, the channel's head) is left out.
    package func replicatedChannelState() throws(StorageError) -> String {
        var text = ""
        for row in try db.rows("SELECT id, name, creator, created_at, deleted FROM channels ORDER BY id") {
            guard let uuid = row.uuid(0) else { throw StorageError(.corrupt, "channels.id is not an identifier") }
            let deleted = row.int64(4) != 0
            text += "c \(uuid) \(row.text(1) ?? "") \(row.text(2) ?? "") \(row.int64(3)) \(deleted ? 1 : 0)\n"
            guard !deleted else { continue }
            let id = Columns.blob(uuid)
            for s in try db.rows(
                """
                SELECT member, is_member, at_physical, at_logical, at_node FROM channel_standings
                WHERE channel_id = ? ORDER BY member
                """, [id])
            {
                text += "s \(s.text(0) ?? "") \(s.int64(1)) \(s.int64(2)).\(s.int64(3)).\(s.int64(4))\n"
            }
            for m in try db.rows(
                """
                SELECT id, sender, sent_at, pos_physical, pos_logical, pos_node, body FROM channel_messages
                WHERE channel_id = ? ORDER BY pos_physical, pos_logical, pos_node, id
                """, [id])
            {
                let body = m.bytes(6).map { Hex.encode($0) } ?? ""
                text +=
                    "m \(m.uuid(0).map(\.uuidString) ?? "") \(m.text(1) ?? "") \(m.int64(2)) \(m.int64(3)).\(m.int64(4)).\(m.int64(5)) \(body)\n"
            }
        }
        return text
    }
}
