import Foundation
import LaminaModel

/// A session as stored. The token itself is never stored, only its SHA-256.
package struct SessionRecord: Hashable, Sendable {
    /// SHA-256 of the session token (32 bytes), computed by the caller.
    package var tokenHash: [UInt8]
    package var user: UserID
    package var device: String
    package var createdAt: Timestamp
    package var expiresAt: Timestamp
    package var revokedAt: Timestamp?

    package init(
        tokenHash: [UInt8], user: UserID, device: String, createdAt: Timestamp, expiresAt: Timestamp,
        revokedAt: Timestamp? = nil
    ) {
        self.tokenHash = tokenHash
        self.user = user
        self.device = device
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
    }
}

extension StorageTransaction {
    /// Records a nonce handed to a client; it is good for one use before `expiresAt`.
    package func issueNonce(_ nonce: String, issuedAt: Timestamp, expiresAt: Timestamp) throws(StorageError) {
        try checkNonce(nonce)
        guard expiresAt > issuedAt else {
            throw StorageError(.invalidArgument, "a nonce must expire after it is issued")
        }
        try db.run(
            "INSERT OR IGNORE INTO nonces (nonce, issued_at, expires_at) VALUES (?, ?, ?)",
            [nonce, issuedAt.millisecondsSince1970, expiresAt.millisecondsSince1970])
        guard db.changesCount == 1 else { throw StorageError(.alreadyExists, "the nonce was issued before") }
    }

    /// Uses a nonce once. Throws `.nonceUnknown` (never issued), `.nonceReused` (used before)
    /// or `.nonceExpired` (issued, unused, too late); only success marks it used.
    package func consumeNonce(_ nonce: String, at time: Timestamp) throws(StorageError) {
        try checkNonce(nonce)
        guard let row = try db.row("SELECT expires_at, used_at FROM nonces WHERE nonce = ?", [nonce]) else {
            throw StorageError(.nonceUnknown, "the nonce was never issued by this node")
        }
        if let usedAt = Columns.optionalTimestamp(row, "used_at") {
            throw StorageError(.nonceReused, "the nonce was already used at \(usedAt)")
        }
        let expiresAt = try Columns.timestamp(row, "expires_at")
        guard time < expiresAt else {
            throw StorageError(.nonceExpired, "the nonce expired at \(expiresAt)")
        }
        try db.run("UPDATE nonces SET used_at = ? WHERE nonce = ?", [time.millisecondsSince1970, nonce])
    }

    /// Deletes nonces that expired before `time`. Returns how many.
    @discardableResult
    package func pruneNonces(expiredBefore time: Timestamp) throws(StorageError) -> Int {
        try db.run("DELETE FROM nonces WHERE expires_at < ?", [time.millisecondsSince1970])
        return db.changesCount
    }

    /// Stores a new session. Refuses a token hash that exists (`.alreadyExists`).
    package func createSession(_ session: SessionRecord) throws(StorageError) {
        try checkTokenHash(session.tokenHash)
        try checkDeviceID(session.device)
        guard session.expiresAt > session.createdAt else {
            throw StorageError(.invalidArgument, "a session must expire after it is created")
        }
        try db.run(
            "INSERT OR IGNORE INTO sessions (token_hash, user_id, device_id, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                Data(session.tokenHash), session.user.rawValue, session.device, session.createdAt.millisecondsSince1970,
                session.expiresAt.millisecondsSince1970, session.revokedAt?.millisecondsSince1970,
            ]
        )
        guard db.changesCount == 1 else { throw StorageError(.alreadyExists, "a session with this token exists") }
    }

    /// Revokes a session. Returns false when it was unknown or already revoked.
    @discardableResult
    package func revokeSession(tokenHash: [UInt8], at time: Timestamp) throws(StorageError) -> Bool {
        try checkTokenHash(tokenHash)
        try db.run(
            "UPDATE sessions SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL",
            [time.millisecondsSince1970, Data(tokenHash)])
        return db.changesCount == 1
    }

    /// Revokes every live session of a user. Returns how many.
    @discardableResult
    package func revokeSessions(of user: UserID, at time: Timestamp) throws(StorageError) -> Int {
        try db.run(
            "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
            [time.millisecondsSince1970, user.rawValue])
        return db.changesCount
    }

    /// Revokes the sessions of `user` created at or before `cutoff` (a revocation replicated
    /// from a peer: sessions made later here stay). Returns how many.
    @discardableResult
    package func revokeSessions(of user: UserID, createdUpTo cutoff: Timestamp, at time: Timestamp) throws(StorageError)
        -> Int
    {
        try db.run(
            "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL AND created_at <= ?",
            [time.millisecondsSince1970, user.rawValue, cutoff.millisecondsSince1970])
        return db.changesCount
    }

    /// Deletes sessions that expired before `time`. Returns how many.
    @discardableResult
    package func pruneSessions(expiredBefore time: Timestamp) throws(StorageError) -> Int {
        try db.run("DELETE FROM sessions WHERE expires_at < ?", [time.millisecondsSince1970])
        return db.changesCount
    }
}

extension StorageReader {
    /// The live session with this token hash. Throws `.sessionUnknown`, `.sessionRevoked` or
    /// `.sessionExpired` (at `time` or later).
    package func session(tokenHash: [UInt8], at time: Timestamp) throws(StorageError) -> SessionRecord {
        try checkTokenHash(tokenHash)
        guard let row = try db.row("SELECT * FROM sessions WHERE token_hash = ?", [Data(tokenHash)]) else {
            throw StorageError(.sessionUnknown, "no session has this token")
        }
        let record = SessionRecord(
            tokenHash: tokenHash,
            user: try Columns.user(row, "user_id"),
            device: row["device_id"],
            createdAt: try Columns.timestamp(row, "created_at"),
            expiresAt: try Columns.timestamp(row, "expires_at"),
            revokedAt: Columns.optionalTimestamp(row, "revoked_at")
        )
        if let revokedAt = record.revokedAt {
            throw StorageError(.sessionRevoked, "the session was revoked at \(revokedAt)")
        }
        guard time < record.expiresAt else {
            throw StorageError(.sessionExpired, "the session expired at \(record.expiresAt)")
        }
        return record
    }
}

extension NodeStore {
    /// A new random nonce: 32 bytes from the system's secure generator, base64url without padding.
    package static func makeNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

private func checkNonce(_ nonce: String) throws(StorageError) {
    let bytes = nonce.utf8.count
    guard bytes > 0, bytes <= StorageLimits.maxNonceBytes else {
        throw StorageError(.invalidArgument, "a nonce is 1...\(StorageLimits.maxNonceBytes) UTF-8 bytes, got \(bytes)")
    }
}

private func checkTokenHash(_ hash: [UInt8]) throws(StorageError) {
    guard hash.count == 32 else {
        throw StorageError(.invalidArgument, "a session token hash is 32 bytes (SHA-256), got \(hash.count)")
    }
}
