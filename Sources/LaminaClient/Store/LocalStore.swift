import Foundation
import GRDB
import LaminaModel

/// Where one user's local data lives: `<dataDirectory>/user-<hash>/` holding the SQLite
/// database and a `content/` folder of rich-content files.
public struct StoreLocation: Hashable, Sendable {
    public var dataDirectory: URL
    public var user: UserID

    public init(dataDirectory: URL, user: UserID) {
        self.dataDirectory = dataDirectory
        self.user = user
    }

    /// The user's own folder. Named by a 64-bit FNV-1a hash of the user id (ids may hold
    /// any character and up to 256 bytes); the store records the full id and checks it.
    public var userDirectory: URL {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in user.rawValue.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return dataDirectory.appendingPathComponent(
            "user-" + String(repeating: "0", count: 16 - hex.count) + hex, isDirectory: true)
    }

    public var databaseURL: URL { userDirectory.appendingPathComponent("lamina.sqlite") }
    public var contentDirectory: URL { userDirectory.appendingPathComponent("content", isDirectory: true) }
}

/// Tunables of the local store, each with an explicit bound.
public struct StoreConfiguration: Hashable, Sendable {
    /// Undelivered change batches one subscriber may have before its stream ends (1...1,000,000).
    public var changeBufferLimit: Int = 10_000
    /// Time added to every write transaction, on the database's writer (0...10 s; default 0):
    /// a slow disk, for tests and benchmarks of what the rest of the SDK does meanwhile.
    public var writeLatency: Duration = .zero

    public init(changeBufferLimit: Int = 10_000, writeLatency: Duration = .zero) {
        self.changeBufferLimit = changeBufferLimit
        self.writeLatency = writeLatency
    }
}

/// The SDK's local store: conversations, messages, parts, recipient statuses, the outbox
/// and the sync cursor of one user, in SQLite (WAL) through GRDB. Everything the app reads
/// comes from here; every write publishes its object changes after it commits.
public final class LocalStore: Sendable {
    public let location: StoreLocation
    /// The authenticated user this store belongs to.
    public var localUser: UserID { location.user }
    let pool: DatabasePool
    let hub: ChangeHub
    /// `StoreConfiguration.writeLatency` in microseconds.
    private let writeLatencyMicros: UInt32

    /// Opens (creating if needed) the store of `location.user` and migrates it.
    public init(location: StoreLocation, configuration: StoreConfiguration = StoreConfiguration()) throws(ClientError) {
        guard (1...1_000_000).contains(configuration.changeBufferLimit) else {
            throw ClientError(
                .invalidSetting, "changeBufferLimit must be 1...1,000,000, not \(configuration.changeBufferLimit)")
        }
        guard configuration.writeLatency >= .zero, configuration.writeLatency <= .seconds(10) else {
            throw ClientError(.invalidSetting, "writeLatency must be 0...10 s")
        }
        self.location = location
        self.hub = ChangeHub(bufferLimit: configuration.changeBufferLimit)
        let (seconds, attoseconds) = configuration.writeLatency.components
        self.writeLatencyMicros = UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
        do {
            try FileManager.default.createDirectory(at: location.contentDirectory, withIntermediateDirectories: true)
            var config = Configuration()
            config.foreignKeysEnabled = true
            config.label = "lamina.client"
            config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
            pool = try DatabasePool(path: location.databaseURL.path, configuration: config)
        } catch {
            throw ClientError(.storage, "cannot open the local store at \(location.userDirectory.path): \(error)")
        }
        let user = location.user.rawValue
        do {
            try StoreSchema.migrator().migrate(pool)
            try pool.write { db in
                if let owner = try String.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'local_user'") {
                    guard owner == user else {
                        throw ClientError(.storeMismatch, "the store at this location belongs to another user")
                    }
                } else {
                    try db.execute(
                        sql: "INSERT INTO store_info(key, value) VALUES ('local_user', ?)", arguments: [user])
                }
            }
        } catch {
            try? pool.close()
            throw ClientError.wrap(error)
        }
    }

    /// Closes the database. Change streams end. Further calls fail with `.storage`.
    public func close() throws(ClientError) {
        hub.finishAll()
        do { try pool.close() } catch { throw ClientError.wrap(error) }
    }

    /// Deletes everything stored for `location.user`: the database files and all content.
    /// Used when the user deauthenticates. Close any open store of that location first.
    public static func wipe(_ location: StoreLocation) throws(ClientError) {
        let dir = location.userDirectory
        guard FileManager.default.fileExists(atPath: dir.path) else { return }
        do { try FileManager.default.removeItem(at: dir) } catch {
            throw ClientError(.storage, "cannot delete \(dir.path): \(error)")
        }
    }

    /// Closes this store and wipes its user's data (deauthentication).
    public func closeAndWipe() throws(ClientError) {
        try close()
        try Self.wipe(location)
    }

    // MARK: change notifications

    /// Every batch of object changes committed from now on, one batch per transaction.
    public func changes() -> AsyncStream<[ObjectChange]> { hub.subscribe() }

    /// Adds a delegate (held weakly) that receives every committed batch.
    public func addDelegate(_ delegate: any LaminaClientDelegate) { hub.addDelegate(delegate) }
    public func removeDelegate(_ delegate: any LaminaClientDelegate) { hub.removeDelegate(delegate) }

    // MARK: transactions

    /// Runs `body` in one write transaction. Its object changes are computed inside the
    /// transaction and published once it commits; files it retires are deleted then too.
    func write<T>(_ body: (WriteContext) throws -> T) throws(ClientError) -> T {
        let hub = self.hub
        do {
            return try pool.write { db in
                if writeLatencyMicros > 0 { usleep(writeLatencyMicros) }
                let context = WriteContext(db: db, store: self)
                let result = try body(context)
                try context.finish()
                let batch = context.changes
                let retired = context.retiredFiles
                db.afterNextTransaction(onCommit: { _ in
                    for file in retired { try? FileManager.default.removeItem(at: file) }
                    hub.publish(batch)
                })
                return result
            }
        } catch {
            throw ClientError.wrap(error)
        }
    }

    /// As `write`, through GRDB's async API: the caller suspends while the writer queue runs
    /// the transaction, so a slow database never holds a thread of Swift's cooperative pool.
    func writeAsync<T: Sendable>(_ body: @escaping @Sendable (WriteContext) throws -> T) async throws(ClientError) -> T
    {
        let hub = self.hub
        do {
            return try await pool.write { [self] db in
                if writeLatencyMicros > 0 { usleep(writeLatencyMicros) }
                let context = WriteContext(db: db, store: self)
                let result = try body(context)
                try context.finish()
                let batch = context.changes
                let retired = context.retiredFiles
                db.afterNextTransaction(onCommit: { _ in
                    for file in retired { try? FileManager.default.removeItem(at: file) }
                    hub.publish(batch)
                })
                return result
            }
        } catch {
            throw ClientError.wrap(error)
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(ClientError) -> T {
        do { return try pool.read(body) } catch { throw ClientError.wrap(error) }
    }

    // MARK: reading objects

    /// The conversation with this identifier, following distinct merges to the survivor.
    public func conversation(_ id: ConversationID) throws(ClientError) -> StoredConversation? {
        try read { db in try StoreReader.conversation(db, StoreReader.resolve(db, id)) }
    }

    /// The message with this identifier.
    public func message(_ id: MessageID) throws(ClientError) -> StoredMessage? {
        try read { db in try StoreReader.message(db, id) }
    }

    /// The user's identity as the node last told it (Server API identities); nil when none is known.
    public func identity(of user: UserID) throws(ClientError) -> UserIdentity? {
        try read { db in try StoredIdentities.identity(db, user) }
    }

    /// The users the local user blocks, as the node last told them.
    public func blockedUsers() throws(ClientError) -> Set<UserID> {
        try read { db in
            Set(try String.fetchAll(db, sql: "SELECT user_id FROM blocked_user").compactMap { try? UserID($0) })
        }
    }

    /// The users the local user follows explicitly (SPEC §6.7), as the node last told them.
    public func followedUsers() throws(ClientError) -> Set<UserID> {
        try read { db in
            Set(try String.fetchAll(db, sql: "SELECT user_id FROM followed_user").compactMap { try? UserID($0) })
        }
    }

    /// The identities this device holds (the user's, and those of users sharing a conversation
    /// with them or followed by them), by user id.
    public func identities() throws(ClientError) -> [UserIdentity] {
        try read { db in
            try String.fetchAll(db, sql: "SELECT user_id FROM identity ORDER BY user_id").compactMap { raw in
                guard let user = try? UserID(raw) else { return nil }
                return try StoredIdentities.identity(db, user)
            }
        }
    }

    /// The identifier a conversation now has: itself, or the survivor of distinct merges.
    public func currentIdentifier(of id: ConversationID) throws(ClientError) -> ConversationID {
        try read { db in try StoreReader.resolve(db, id) }
    }

    /// Messages of a conversation in position order (messages not yet sent last).
    public func messages(in conversation: ConversationID) throws(ClientError) -> [StoredMessage] {
        try read { db in
            let id = try StoreReader.resolve(db, conversation)
            let ids = try Data.fetchAll(
                db,
                sql:
                    "SELECT id FROM message WHERE conversation_id = ? ORDER BY \(StoreReader.positionOrder(descending: false))",
                arguments: [StoreCoding.blob(id)])
            return try ids.compactMap { try StoreReader.message(db, MessageID(uuid: StoreCoding.uuid($0))) }
        }
    }

    /// The sync cursor: how far this device has applied the user's change feed.
    public func syncCursor() throws(ClientError) -> UInt64? {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'sync_cursor'").map {
                UInt64(bitPattern: $0)
            }
        }
    }

    /// The cursor to sync from on `node`: the stored one when it was made on that node, else 0
    /// (a feed's seqs are one node's own: a device that moves to another node of a cluster
    /// replays that node's feed of its user; applying what it holds again changes nothing).
    /// Remembers `node` as where the cursor now counts.
    public func syncCursor(on node: NodeID) throws(ClientError) -> UInt64 {
        try write(Self.syncCursorBody(on: node))
    }

    static func syncCursorBody(on node: NodeID) -> @Sendable (WriteContext) throws -> UInt64 {
        { ctx in
            let stored = try Int64.fetchOne(ctx.db, sql: "SELECT value FROM store_info WHERE key = 'sync_node'").map {
                UInt64(bitPattern: $0)
            }
            if stored == node.rawValue {
                return try Int64.fetchOne(ctx.db, sql: "SELECT value FROM store_info WHERE key = 'sync_cursor'").map {
                    UInt64(bitPattern: $0)
                } ?? 0
            }
            try ctx.db.execute(
                sql:
                    "INSERT INTO store_info(key, value) VALUES ('sync_node', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [Int64(bitPattern: node.rawValue)])
            try ctx.setCursor(0)
            return 0
        }
    }

    /// Records the sync cursor as counting in `node`'s feed (a restored or migrated store).
    public func setSyncCursor(_ cursor: UInt64, on node: NodeID) throws(ClientError) {
        try write { ctx in
            try ctx.db.execute(
                sql:
                    "INSERT INTO store_info(key, value) VALUES ('sync_node', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [Int64(bitPattern: node.rawValue)])
            try ctx.setCursor(cursor)
        }
    }

    /// Records the sync cursor on its own (`apply(_:cursor:)` records it with the changes).
    public func setSyncCursor(_ cursor: UInt64) throws(ClientError) {
        try write { ctx in try ctx.setCursor(cursor) }
    }

    /// As `setSyncCursor(_:)`, through GRDB's async API.
    func setSyncCursorAsync(_ cursor: UInt64) async throws(ClientError) {
        try await writeAsync { ctx in try ctx.setCursor(cursor) }
    }
}
