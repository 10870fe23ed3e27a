import Foundation
import GRDB
import LaminaModel

/// The store operations the sync session runs, through GRDB's async API: the session (an
/// actor on Swift's cooperative pool) suspends while GRDB's reader or writer queue runs the
/// SQL, so a slow database never holds a cooperative thread. Each runs the same body as its
/// synchronous namesake (which the app's own calls use).
extension LocalStore {
    /// As `read`, through GRDB's async API.
    func readAsync<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ClientError) -> T {
        do { return try await pool.read(body) } catch { throw ClientError.wrap(error) }
    }

    // MARK: the handshake

    func syncCursorAsync(on node: NodeID) async throws(ClientError) -> UInt64 {
        try await writeAsync(Self.syncCursorBody(on: node))
    }

    func deviceIDAsync() async throws(ClientError) -> UUID {
        try await writeAsync(Self.deviceIDBody)
    }

    func sessionTokenAsync() async throws(ClientError) -> String? {
        try await readAsync { db in
            try String.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'session_token'")
        }
    }

    func setSessionTokenAsync(_ token: String?) async throws(ClientError) {
        try await writeAsync(Self.sessionTokenBody(token))
    }

    /// Forgets the session token if it is still `token` (a new session may have replaced it).
    func forgetSessionTokenAsync(ifStill token: String) async throws(ClientError) {
        try await writeAsync { ctx in
            try ctx.db.execute(
                sql: "DELETE FROM store_info WHERE key = 'session_token' AND value = ?", arguments: [token])
        }
    }

    func requeueAsync(_ id: UUID) async throws(ClientError) {
        try await writeAsync(Self.requeueBody(id))
    }

    func requeueInFlightAsync() async throws(ClientError) {
        try await writeAsync { ctx in try ctx.db.execute(sql: "UPDATE outbox SET state = 0 WHERE state = 1") }
    }

    // MARK: a snapshot's fill

    func dropConversationsAsync(notIn kept: Set<ConversationID>) async throws(ClientError) {
        try await writeAsync(Self.dropConversationsBody(notIn: kept, localUser: localUser))
    }

    func dropMessagesAsync(in conversation: ConversationID, notIn returned: [MessageID], after start: MessagePosition?)
        async throws(ClientError)
    {
        try await writeAsync(Self.dropMessagesBody(in: conversation, notIn: returned, after: start))
    }

    func pendingPolicyFillsAsync() async throws(ClientError) -> [PendingPolicyFill] {
        try await readAsync(Self.pendingPolicyFillsBody)
    }

    func setPendingPolicyFillsAsync(_ ids: [ConversationID]) async throws(ClientError) {
        try await writeAsync(Self.setPendingPolicyFillsBody(ids))
    }

    func advancePolicyFillAsync(_ id: ConversationID, after position: MessagePosition) async throws(ClientError) {
        try await writeAsync(Self.advancePolicyFillBody(id, after: position))
    }

    func removePendingPolicyFillAsync(_ id: ConversationID) async throws(ClientError) {
        try await writeAsync(Self.removePendingPolicyFillBody(id))
    }

    // MARK: reads

    func currentIdentifierAsync(of id: ConversationID) async throws(ClientError) -> ConversationID {
        try await readAsync { db in try StoreReader.resolve(db, id) }
    }

    func outboxContainsAsync(_ id: UUID) async throws(ClientError) -> Bool {
        try await readAsync { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM outbox WHERE id = ?)", arguments: [StoreCoding.blob(id)]) ?? false
        }
    }

    /// Forgets the device's push token if it is still `token` (the app may have set another meanwhile).
    func forgetDevicePushTokenAsync(ifStill token: DevicePushToken) async throws(ClientError) {
        try await writeAsync { ctx in
            try ctx.db.execute(
                sql: "DELETE FROM store_info WHERE key = 'push_token' AND value = ?", arguments: [token.stored])
        }
    }

    func devicePushTokenAsync() async throws(ClientError) -> DevicePushToken? {
        try await readAsync { db in
            try String.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'push_token'").flatMap(
                DevicePushToken.init(stored:))
        }
    }

    func conversationAsync(_ id: ConversationID) async throws(ClientError) -> StoredConversation? {
        try await readAsync { db in try StoreReader.conversation(db, StoreReader.resolve(db, id)) }
    }

    func messageAsync(_ id: MessageID) async throws(ClientError) -> StoredMessage? {
        try await readAsync { db in try StoreReader.message(db, id) }
    }

    func pendingEntriesAsync(kind: String, objectID object: UUID) async throws(ClientError) -> [OutboxEntry] {
        try await readAsync { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM outbox WHERE state = 0 AND kind = ? AND object_id = ? ORDER BY seq",
                arguments: [kind, StoreCoding.blob(object)]
            ).map(LocalStore.outboxEntry)
        }
    }
}
