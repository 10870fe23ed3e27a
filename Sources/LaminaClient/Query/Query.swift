import Foundation
import LaminaModel

/// An object a query can return: a stored conversation or message.
public protocol QueryableObject: Hashable, Sendable, Identifiable where ID: Sendable {
    static var queryTarget: QueryTarget { get }
    static func load(_ row: QueryRow) throws -> Self
    /// The identifier of the object a row holds (a row of the query's identifier column).
    static func identifier(_ row: QueryRow) throws -> ID
    /// The property names a query controller's `updatableProperties` may list: those of the
    /// object changes (`ConversationProperty`, `MessageProperty`).
    static var updatableProperties: Set<String> { get }
    /// The names of the properties whose values differ from `old` (the same object before).
    func changedProperties(since old: Self) -> Set<String>
}

extension QueryableObject where ID: LaminaIdentifier {
    /// The UUID in the row's first column.
    public static func identifier(_ row: QueryRow) throws -> ID {
        let bytes: Data = row.row[0]
        return ID(uuid: StoreCoding.uuid(bytes))
    }
}

extension StoredConversation: QueryableObject {
    public static var queryTarget: QueryTarget { .conversations }
    public static func load(_ row: QueryRow) throws -> StoredConversation { try StoreReader.conversation(row) }
    public static let updatableProperties: Set<String> = [
        ConversationProperty.identifier, ConversationProperty.participants, ConversationProperty.isDistinct,
        ConversationProperty.metadata,
        ConversationProperty.deliveryReceiptsEnabled, ConversationProperty.readReceiptsEnabled,
        ConversationProperty.isSynced, ConversationProperty.lastMessage,
        ConversationProperty.totalMessageCount, ConversationProperty.unreadMessageCount,
        ConversationProperty.totalNumberOfMessages, ConversationProperty.totalNumberOfUnreadMessages,
    ]
    public func changedProperties(since old: StoredConversation) -> Set<String> {
        Set(ChangeComputation.conversationUpdates(before: old, after: self).compactMap(\.property))
    }
}

extension StoredMessage: QueryableObject {
    public static var queryTarget: QueryTarget { .messages }
    public static func load(_ row: QueryRow) throws -> StoredMessage { try StoreReader.message(row) }
    public static let updatableProperties: Set<String> = [
        MessageProperty.conversation, MessageProperty.position, MessageProperty.sentAt, MessageProperty.isSent,
        MessageProperty.parts,
        MessageProperty.recipientStatus, MessageProperty.isUnread, MessageProperty.receivedAt,
        MessageProperty.reactions,
        MessageProperty.thread, MessageProperty.editedAt,
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

    public init(
        predicate: QueryPredicate? = nil, sortDescriptors: [QuerySortDescriptor] = [], limit: Int? = nil,
        offset: Int = 0
    ) {
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        self.limit = limit
        self.offset = offset
    }

    /// Checks the query (properties, types, limits) without running it.
    public func validate() throws(ClientError) { _ = try compiled() }

    func compiled() throws(ClientError) -> CompiledQuery {
        try QueryCompiler.compile(
            target: Object.queryTarget, predicate: predicate, sort: sortDescriptors, limit: limit, offset: offset)
    }
}
