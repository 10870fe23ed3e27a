import Foundation
import GRDB
import LaminaModel

/// An object a query can return: a stored conversation or message.
public protocol QueryableObject: Hashable, Sendable, Identifiable where ID: LaminaIdentifier {
    static var queryTarget: QueryTarget { get }
    static func load(_ db: Database, row: Row) throws -> Self
    /// The property names a query controller's `updatableProperties` may list: those of the
    /// object changes (`ConversationProperty`, `MessageProperty`).
    static var updatableProperties: Set<String> { get }
    /// The names of the properties whose values differ from `old` (the same object before).
    func changedProperties(since old: Self) -> Set<String>
}

extension StoredConversation: QueryableObject {
    public static var queryTarget: QueryTarget { .conversations }
    public static func load(_ db: Database, row: Row) throws -> StoredConversation { try StoreReader.conversation(db, row: row) }
    public static let updatableProperties: Set<String> = [
        ConversationProperty.identifier, ConversationProperty.participants, ConversationProperty.isDistinct, ConversationProperty.metadata,
        ConversationProperty.deliveryReceiptsEnabled, ConversationProperty.isSynced, ConversationProperty.lastMessage,
        ConversationProperty.totalMessageCount, ConversationProperty.unreadMessageCount,
        ConversationProperty.totalNumberOfMessages, ConversationProperty.totalNumberOfUnreadMessages,
    ]
    public func changedProperties(since old: StoredConversation) -> Set<String> {
        Set(ChangeComputation.conversationUpdates(before: old, after: self).compactMap(\.property))
    }
}

extension StoredMessage: QueryableObject {
    public static var queryTarget: QueryTarget { .messages }
    public static func load(_ db: Database, row: Row) throws -> StoredMessage { try StoreReader.message(db, row: row) }
    public static let updatableProperties: Set<String> = [
        MessageProperty.conversation, MessageProperty.position, MessageProperty.sentAt, MessageProperty.isSent, MessageProperty.parts,
        MessageProperty.recipientStatus, MessageProperty.isUnread, MessageProperty.receivedAt,
    ]
    /// A part's local state (its transfer) counts as a change of `parts`.
    public func changedProperties(since old: StoredMessage) -> Set<String> {
        var out = Set(ChangeComputation.messageUpdates(before: old, after: self).compactMap(\.property))
        if partStates != old.partStates { out.insert(MessageProperty.parts) }
        return out
    }
}

/// A query over conversations (`Query<StoredConversation>`) or messages
/// (`Query<StoredMessage>`): a predicate, an order, a limit and an offset.
public struct Query<Object: QueryableObject>: Hashable, Sendable {
    public var predicate: QueryPredicate?
    public var sortDescriptors: [QuerySortDescriptor]
    public var limit: Int?
    public var offset: Int

    public init(predicate: QueryPredicate? = nil, sortDescriptors: [QuerySortDescriptor] = [], limit: Int? = nil, offset: Int = 0) {
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        self.limit = limit
        self.offset = offset
    }

    /// Checks the query (properties, types, limits) without running it.
    public func validate() throws(ClientError) { _ = try compiled() }

    func compiled() throws(ClientError) -> CompiledQuery {
        try QueryCompiler.compile(target: Object.queryTarget, predicate: predicate, sort: sortDescriptors, limit: limit, offset: offset)
    }

    /// The SELECT for `columns` of the matching rows, in order, limited.
    func statement(_ columns: String) throws(ClientError) -> (String, StatementArguments) {
        let c = try compiled()
        let table = Object.queryTarget.table
        var sql = "SELECT \(columns) FROM \(table) WHERE \(c.condition.sql) ORDER BY \(c.order.sql)"
        var args = c.arguments
        if c.limit != nil || c.offset > 0 {
            sql += " LIMIT ? OFFSET ?"
            args += [c.limit ?? -1, c.offset]
        }
        return (sql, args)
    }
}

extension LocalStore {
    /// The objects matching `query`, in its order.
    public func execute<Object>(_ query: Query<Object>) throws(ClientError) -> [Object] {
        let (sql, args) = try query.statement("\(Object.queryTarget.table).*")
        return try read { db in try Row.fetchAll(db, sql: sql, arguments: args).map { try Object.load(db, row: $0) } }
    }

    /// The identifiers of the objects matching `query`, in its order.
    public func identifiers<Object>(_ query: Query<Object>) throws(ClientError) -> [Object.ID] {
        let (sql, args) = try query.statement("\(Object.queryTarget.table).id")
        return try read { db in try Data.fetchAll(db, sql: sql, arguments: args).map { Object.ID(uuid: StoreCoding.uuid($0)) } }
    }

    /// How many objects `query` returns (its limit and offset applied).
    public func count<Object>(_ query: Query<Object>) throws(ClientError) -> Int {
        let (sql, args) = try query.statement("\(Object.queryTarget.table).id")
        return try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(sql))", arguments: args) ?? 0 }
    }
}

extension LocalStore {
    /// The objects of `query` inside a pagination window, and how many `query` returns in
    /// all, read in one transaction. `window` n > 0: the first n; n < 0: the last -n; nil: all.
    func execute<Object>(_ query: Query<Object>, window: Int?) throws(ClientError) -> (objects: [Object], total: Int) {
        guard let window else {
            let all = try execute(query)
            return (all, all.count)
        }
        let table = Object.queryTarget.table
        let (countSQL, countArguments) = try query.statement("\(table).id")
        return try read { db in
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(countSQL))", arguments: countArguments) ?? 0
            let size = Int(window.magnitude)
            let start = window > 0 ? 0 : max(0, total - size)
            var windowed = query
            windowed.offset = query.offset + start
            windowed.limit = min(size, total - start)
            let (sql, arguments) = try windowed.statement("\(table).*")
            return (try Row.fetchAll(db, sql: sql, arguments: arguments).map { try Object.load(db, row: $0) }, total)
        }
    }
}
