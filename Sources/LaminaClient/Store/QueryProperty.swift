import GRDB
import LaminaModel

/// What a queryable property holds, which decides the values and operators it accepts.
enum QueryPropertyKind: String, Hashable, Sendable {
    case bool, integer, text, user, conversationID, messageID, channelID, timestamp, position
    /// A set of users, tested with `contains` (one user) or `=`/`!=` (the exact set).
    case participants
    /// The MIME types of a message's parts, tested with `contains`.
    case mimeTypes
    /// The users who reacted to a message, tested with `contains` (one user).
    case reactors
    /// The users a message mentions, tested with `contains` (one user).
    case mentions
}

/// A piece of SQL with the values bound to its `?` placeholders, in order.
struct SQLFragment {
    var sql: String
    var arguments: [DatabaseValue] = []
}

/// A property a query may name: its kind and the SQL expression(s) that read it from
/// a row of the query's table. Expressions never contain caller-supplied text.
struct QueryProperty {
    var kind: QueryPropertyKind
    /// One expression; three (physical, logical, node) for positions; none for collections.
    var columns: [SQLFragment]
    var nullable: Bool

    static func scalar(_ kind: QueryPropertyKind, _ sql: String, nullable: Bool = false) -> QueryProperty {
        QueryProperty(kind: kind, columns: [SQLFragment(sql: sql)], nullable: nullable)
    }
}

/// The kinds of objects a query returns.
public enum QueryTarget: String, Hashable, Sendable {
    case conversations
    case messages
    /// Channels the device holds (SPEC §6.8).
    case channels
    /// Messages of channels.
    case channelMessages
    /// Identities the device holds: of the users it shares a conversation with and of those
    /// the user follows (SPEC §6.7).
    case identities

    var table: String {
        switch self {
        case .conversations: "conversation"
        case .messages: "message"
        case .channels: "channel"
        case .channelMessages: "channel_message"
        case .identities: "identity"
        }
    }

    /// The column holding an object's identifier.
    var idColumn: String { self == .identities ? "user_id" : "id" }

    /// The last sort term, which makes the order total (the identity table has no rowid).
    var tieBreakColumn: String { self == .identities ? "user_id" : "rowid" }

    /// Rows of the table that are live objects.
    var baseCondition: String? { self == .conversations ? "conversation.merged_into IS NULL" : nil }

    /// The named properties of this target.
    func property(_ name: String) throws(ClientError) -> QueryProperty {
        switch self {
        case .conversations:
            if name.hasPrefix("metadata.") {
                let path: MetadataKeyPath
                do { path = try MetadataKeyPath(parsing: String(name.dropFirst("metadata.".count))) } catch {
                    throw ClientError(
                        .unknownProperty, "'\(name.prefix(200))' is not a valid metadata key path: \(error.reason)")
                }
                return QueryProperty(
                    kind: .text,
                    columns: [
                        SQLFragment(
                            sql:
                                "(SELECT ml.value FROM metadata_leaf ml WHERE ml.conversation_id = conversation.id AND ml.path = ?)",
                            arguments: [path.description.databaseValue])
                    ], nullable: true)
            }
            switch name {
            case ConversationProperty.identifier: return .scalar(.conversationID, "conversation.id")
            case ConversationProperty.participants:
                return QueryProperty(kind: .participants, columns: [], nullable: false)
            case ConversationProperty.isDistinct, "distinct": return .scalar(.bool, "conversation.is_distinct")
            case ConversationProperty.deliveryReceiptsEnabled: return .scalar(.bool, "conversation.receipts_enabled")
            case ConversationProperty.readReceiptsEnabled:
                return .scalar(.bool, "conversation.read_receipts_enabled")
            case ConversationProperty.isSynced: return .scalar(.bool, "conversation.is_synced")
            case "createdAt": return .scalar(.timestamp, "conversation.created_at")
            case "creator": return .scalar(.user, "conversation.creator")
            case ConversationProperty.totalMessageCount: return .scalar(.integer, "conversation.total_count")
            case ConversationProperty.unreadMessageCount: return .scalar(.integer, "conversation.unread_count")
            case ConversationProperty.totalNumberOfMessages: return .scalar(.integer, "conversation.number_of_messages")
            case ConversationProperty.totalNumberOfUnreadMessages:
                return .scalar(.integer, "conversation.number_of_unread")
            case ConversationProperty.lastMessage:
                return .scalar(.messageID, "conversation.last_message_id", nullable: true)
            case "lastMessage.sentAt":
                return .scalar(
                    .timestamp, "(SELECT lm.sent_at FROM message lm WHERE lm.id = conversation.last_message_id)",
                    nullable: true)
            case "lastMessage.position":
                return QueryProperty(
                    kind: .position,
                    columns: ["pos_physical", "pos_logical", "pos_node"].map {
                        SQLFragment(sql: "(SELECT lm.\($0) FROM message lm WHERE lm.id = conversation.last_message_id)")
                    }, nullable: true)
            default: break
            }
        case .messages:
            switch name {
            case "identifier": return .scalar(.messageID, "message.id")
            case MessageProperty.conversation: return .scalar(.conversationID, "message.conversation_id")
            case "sender": return .scalar(.user, "message.sender")
            case MessageProperty.position:
                return QueryProperty(
                    kind: .position,
                    columns: ["message.pos_physical", "message.pos_logical", "message.pos_node"].map {
                        SQLFragment(sql: $0)
                    }, nullable: true)
            case MessageProperty.sentAt: return .scalar(.timestamp, "message.sent_at", nullable: true)
            case MessageProperty.receivedAt: return .scalar(.timestamp, "message.received_at", nullable: true)
            case MessageProperty.isSent: return .scalar(.bool, "message.is_sent")
            case MessageProperty.isUnread: return .scalar(.bool, "message.is_unread")
            case MessageProperty.replyTo: return .scalar(.messageID, "message.reply_to", nullable: true)
            case MessageProperty.threadReplyCount: return .scalar(.integer, "message.thread_count")
            case "parts.mimeType": return QueryProperty(kind: .mimeTypes, columns: [], nullable: false)
            case MessageProperty.reactionCount:
                return .scalar(.integer, "(SELECT COUNT(*) FROM message_reaction mr WHERE mr.message_id = message.id)")
            case MessageProperty.reactedBy: return QueryProperty(kind: .reactors, columns: [], nullable: false)
            case MessageProperty.mentions: return QueryProperty(kind: .mentions, columns: [], nullable: false)
            default: break
            }
        case .channels:
            switch name {
            case ChannelProperty.identifier: return .scalar(.channelID, "channel.id")
            case ChannelProperty.name: return .scalar(.text, "channel.name")
            case ChannelProperty.creator: return .scalar(.user, "channel.creator")
            case ChannelProperty.createdAt: return .scalar(.timestamp, "channel.created_at")
            case ChannelProperty.isMember: return .scalar(.bool, "channel.is_member")
            default: break
            }
        case .channelMessages:
            switch name {
            case ChannelMessageProperty.identifier: return .scalar(.messageID, "channel_message.id")
            case ChannelMessageProperty.channel: return .scalar(.channelID, "channel_message.channel_id")
            case ChannelMessageProperty.sender: return .scalar(.user, "channel_message.sender")
            case ChannelMessageProperty.sentAt: return .scalar(.timestamp, "channel_message.sent_at")
            case ChannelMessageProperty.logSeq: return .scalar(.integer, "channel_message.log_seq")
            case "parts.mimeType": return QueryProperty(kind: .mimeTypes, columns: [], nullable: false)
            case ChannelMessageProperty.position:
                return QueryProperty(
                    kind: .position,
                    columns: [
                        "channel_message.pos_physical", "channel_message.pos_logical", "channel_message.pos_node",
                    ]
                    .map { SQLFragment(sql: $0) }, nullable: false)
            default: break
            }
        case .identities:
            switch name {
            case IdentityProperty.userID: return .scalar(.user, "identity.user_id")
            case IdentityProperty.displayName:
                return .scalar(.text, "json_extract(identity.fields, '$.display_name')", nullable: true)
            case IdentityProperty.isFollowed:
                return .scalar(
                    .bool, "EXISTS (SELECT 1 FROM followed_user f WHERE f.user_id = identity.user_id)")
            default: break
            }
        }
        throw ClientError(.unknownProperty, "\(rawValue) have no queryable property '\(name.prefix(200))'")
    }
}
