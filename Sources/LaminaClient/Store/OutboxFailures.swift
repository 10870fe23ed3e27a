import Foundation
import GRDB
import LaminaModel
import LaminaWire

/// A command the node refused for good (a non-transient ERROR): taken out of the outbox
/// and kept with the node's code and reason, so the app can see why it did not go out.
public struct OutboxFailure: Hashable, Sendable {
    public var id: UUID
    public var kind: String
    public var objectID: UUID?
    /// The node's error code (SPEC §9), as its wire value.
    public var code: UInt16
    public var reason: String
    public var failedAt: Timestamp

    public init(id: UUID, kind: String, objectID: UUID?, code: UInt16, reason: String, failedAt: Timestamp) {
        self.id = id
        self.kind = kind
        self.objectID = objectID
        self.code = code
        self.reason = reason
        self.failedAt = failedAt
    }

    /// The failure as an error: the node's code (by its SPEC §9 name) and reason.
    public var error: ClientError {
        ClientError(ClientError.Code(rawValue: WireError.Code(wireValue: code).name), reason)
    }
}

extension LocalStore {
    /// The longest failure reason kept, in UTF-8 bytes (the wire's free-text limit).
    public static let maxFailureReasonBytes = 1_024

    /// Moves an entry from the outbox to the failures with the node's code and reason, and
    /// tells the delegates (`LaminaClientDelegate.didFailOperation`) once it is stored.
    /// Returns false when the entry was not in the outbox (a repeated ERROR).
    @discardableResult
    public func markFailed(_ id: UUID, code: UInt16, reason: String, at time: Timestamp = .now()) throws(ClientError)
        -> Bool
    {
        published(try write(Self.markFailedBody(id, code: code, reason: reason, at: time)))
    }

    /// As ``markFailed(_:code:reason:at:)``, through GRDB's async API (the sync session's).
    @discardableResult
    func markFailedAsync(_ id: UUID, code: UInt16, reason: String, at time: Timestamp) async throws(ClientError) -> Bool
    {
        published(try await writeAsync(Self.markFailedBody(id, code: code, reason: reason, at: time)))
    }

    /// Tells the delegates of a failure once it is stored; false when there was none.
    private func published(_ failure: OutboxFailure?) -> Bool {
        guard let failure else { return false }
        hub.publishFailure(failure)
        return true
    }

    static func markFailedBody(_ id: UUID, code: UInt16, reason: String, at time: Timestamp)
        -> @Sendable (WriteContext) throws -> OutboxFailure?
    {
        let kept =
            reason.utf8.count <= Self.maxFailureReasonBytes
            ? reason : String(decoding: reason.utf8.prefix(Self.maxFailureReasonBytes), as: UTF8.self)
        return { ctx -> OutboxFailure? in
            guard
                let row = try Row.fetchOne(
                    ctx.db, sql: "SELECT * FROM outbox WHERE id = ?", arguments: [StoreCoding.blob(id)])
            else { return nil }
            let entry = try Self.outboxEntry(row)
            // What the refused command changed here and can be undone goes back with it.
            if entry.kind == OutboxCommandKind.setNotificationLevel.rawValue { try ctx.undoNotificationLevel(of: id) }
            try ctx.db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [StoreCoding.blob(id)])
            try ctx.db.execute(
                sql: """
                    INSERT INTO outbox_failure(id, kind, object_id, code, reason, failed_at) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT(id) DO NOTHING
                    """,
                arguments: [
                    StoreCoding.blob(id), entry.kind, entry.objectID.map(StoreCoding.blob), Int(code), kept,
                    time.millisecondsSince1970,
                ])
            return OutboxFailure(
                id: id, kind: entry.kind, objectID: entry.objectID, code: code, reason: kept, failedAt: time)
        }
    }

    /// Puts one in-flight entry back to pending (a transient ERROR), keeping its place.
    public func requeue(_ id: UUID) throws(ClientError) {
        try write(Self.requeueBody(id))
    }

    static func requeueBody(_ id: UUID) -> @Sendable (WriteContext) throws -> Void {
        { ctx in try ctx.db.execute(sql: "UPDATE outbox SET state = 0 WHERE id = ?", arguments: [StoreCoding.blob(id)])
        }
    }

    /// Every failed command, oldest first.
    public func outboxFailures() throws(ClientError) -> [OutboxFailure] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM outbox_failure ORDER BY failed_at, rowid").map { row in
                OutboxFailure(
                    id: try StoreCoding.uuid(row, "id"), kind: row["kind"],
                    objectID: try StoreCoding.optionalUUID(row, "object_id"),
                    code: UInt16(truncatingIfNeeded: row["code"] as Int), reason: row["reason"],
                    failedAt: Timestamp(millisecondsSince1970: row["failed_at"]))
            }
        }
    }

    /// The failure recorded for commands about `objectID` (e.g. a message's send), if any.
    public func failure(for objectID: UUID) throws(ClientError) -> OutboxFailure? {
        try outboxFailures().last { $0.objectID == objectID }
    }

    // MARK: session state (store_info)

    /// This device's stable id for the node (SPEC §5.2), created on first use.
    public func deviceID() throws(ClientError) -> UUID {
        try write(Self.deviceIDBody)
    }

    static let deviceIDBody: @Sendable (WriteContext) throws -> UUID = {
        { ctx in
            if let data = try Data.fetchOne(ctx.db, sql: "SELECT value FROM store_info WHERE key = 'device_id'") {
                return StoreCoding.uuid(data)
            }
            let id = UUID()
            try ctx.db.execute(
                sql: "INSERT INTO store_info(key, value) VALUES ('device_id', ?)", arguments: [StoreCoding.blob(id)])
            return id
        }
    }()

    /// The session token of the last authentication, if any.
    public func sessionToken() throws(ClientError) -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'session_token'") }
    }

    /// Records (or, with nil, forgets) the session token.
    public func setSessionToken(_ token: String?) throws(ClientError) {
        try write(Self.sessionTokenBody(token))
    }

    static func sessionTokenBody(_ token: String?) -> @Sendable (WriteContext) throws -> Void {
        { ctx in
            if let token {
                try ctx.db.execute(
                    sql:
                        "INSERT INTO store_info(key, value) VALUES ('session_token', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: [token])
            } else {
                try ctx.db.execute(sql: "DELETE FROM store_info WHERE key = 'session_token'")
            }
        }
    }
}
