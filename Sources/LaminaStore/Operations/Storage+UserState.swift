import Foundation
import LaminaModel
import LaminaWire

/// The last-writer-wins registers of the replicated state about users (SPEC §6.5): per kind
/// (identity, block, badge, session revocation) and key, the HLC reading of the write that
/// holds. Local writes and peers' writes both set them; `LastWriterWins` decides.
extension UserStateChange {
    /// The register the change writes: its kind and a key within the kind.
    var register: (kind: Int64, key: String) {
        switch self {
        case .identity(let i): (Int64(kind), i.user.rawValue)
        // The blocker's length first, so the pair's key is unambiguous (no separator needed).
        case .block(let b): (Int64(kind), "\(b.blocker.rawValue.utf8.count):\(b.blocker.rawValue)\(b.blocked.rawValue)")
        case .badge(let b): (Int64(kind), b.user.rawValue)
        case .sessionsRevoked(let user): (Int64(kind), user.rawValue)
        // One per device (a user id has no NUL; the device is a UUID).
        case .pushRegistration(let r): (Int64(kind), "\(r.user.rawValue)\u{0}\(r.device.uuidString.lowercased())")
        case .suspension(let s): (Int64(kind), s.user.rawValue)
        // One per follower and followed, keyed as a block is.
        case .follow(let f):
            (Int64(kind), "\(f.follower.rawValue.utf8.count):\(f.follower.rawValue)\(f.followed.rawValue)")
        // Not used: the level's own table is its register (`applyNotificationLevel`).
        case .notificationLevel(let n):
            (Int64(kind), "\(n.user.rawValue)\u{0}\(n.conversationID.uuid.uuidString.lowercased())")
        }
    }
}

extension StorageTransaction {
    /// Sets the register of `change` to `hlc`.
    package func setRegister(of change: UserStateChange, to hlc: HLCTimestamp) throws(StorageError) {
        let (kind, key) = change.register
        let stored = db.dialect.registerKey(key)
        let (p, l, n) = try Columns.hlc(hlc)
        try db.run(
            """
            INSERT INTO user_state_registers (kind, key, hlc_physical, hlc_logical, hlc_node) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (kind, key) DO UPDATE SET hlc_physical = excluded.hlc_physical, hlc_logical = excluded.hlc_logical, hlc_node = excluded.hlc_node
            """,
            [kind, stored, p, l, n])
    }
}

extension StorageReader {
    /// The reading of the write the register of `change` holds (nil: never written).
    package func register(of change: UserStateChange) throws(StorageError) -> HLCTimestamp? {
        let (kind, key) = change.register
        guard
            let row = try db.row(
                "SELECT hlc_physical, hlc_logical, hlc_node FROM user_state_registers WHERE kind = ? AND key = ?",
                [kind, db.dialect.registerKey(key)]
            )
        else {
            return nil
        }
        return try Columns.hlc(row, "hlc")
    }

    /// The replicated state about users in one canonical text (identities, blocks, badges, follows),
    /// equal on nodes that hold the same operations (part of the convergence digest).
    package func replicatedUserState() throws(StorageError) -> String {
        var text = ""
        for row in try db.rows("SELECT user_id, identity FROM identities ORDER BY user_id") {
            let data: Data = row["identity"]
            let identity: StoredIdentity
            do { identity = try JSONDecoder().decode(StoredIdentity.self, from: data) } catch {
                throw StorageError(.corrupt, "an identity does not decode: \(error)")
            }
            let values = identity.values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                separator: ",")
            let metadata = identity.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                separator: ",")
            text += "i \(row["user_id"] as String) [\(values)] [\(metadata)]\n"
        }
        for row in try db.rows("SELECT blocker, blocked FROM blocks ORDER BY blocker, blocked") {
            text += "b \(row["blocker"] as String) \(row["blocked"] as String)\n"
        }
        for row in try db.rows("SELECT user_id, external_unread_count FROM badges ORDER BY user_id") {
            text += "u \(row["user_id"] as String) \(row["external_unread_count"] as Int64)\n"
        }
        for row in try db.rows("SELECT user_id FROM user_suspensions ORDER BY user_id") {
            text += "s \(row["user_id"] as String)\n"
        }
        for row in try db.rows("SELECT follower, followed FROM follows ORDER BY follower, followed") {
            text += "f \(row["follower"] as String) \(row["followed"] as String)\n"
        }
        return text + (try replicatedNotificationLevels())
    }
}

extension SQLDialect {
    /// A register's key as stored. PostgreSQL's TEXT holds no NUL (the push registration's
    /// separator): there it is U+0001, a control character that no user id holds (nor a UUID),
    /// so keys stay distinct. SQLite keeps the key as it is.
    func registerKey(_ key: String) -> String {
        switch self {
        case .sqlite: key
        case .postgres: key.replacingOccurrences(of: "\u{0}", with: "\u{1}")
        }
    }
}
