import Foundation
import LaminaMerge
import LaminaModel

/// A conversation as the local store holds it: the model object plus the device's own
/// bookkeeping (synced flag, last message, counts).
public struct StoredConversation: Hashable, Sendable, Identifiable {
    public var conversation: Conversation
    /// False for a conversation created on this device until its first message reaches the node.
    public var isSynced: Bool
    /// The last message by position (messages not yet sent come last).
    public var lastMessageID: MessageID?
    /// Messages of the conversation in the local store.
    public var totalMessageCount: Int
    /// Messages of the conversation in the local store the local user has not read.
    public var unreadMessageCount: Int
    /// The conversation's counts as the node keeps them for the local user (SPEC §6.4), kept
    /// current from the feed; nil until the node first tells them.
    public var nodeCounts: NodeCounts?
    /// Every message of the conversation for the local user, held here or not (the docs'
    /// `totalNumberOfMessages`): the node's count plus messages not sent yet; the local count
    /// while the node has not told its count.
    public var totalNumberOfMessages: Int
    /// Every unread message of the conversation, held here or not (the docs'
    /// `totalNumberOfUnreadMessages`): the node's count; the local count until it is known.
    public var totalNumberOfUnreadMessages: Int
    /// How much of the conversation notifies the local user (pushes and the badge, SPEC §6.10):
    /// the level they set from any device, `all` when never set.
    public var notificationLevel: NotificationLevel = .all
    /// When ``notificationLevel`` ends (then it is `all` again); nil: no end.
    public var notificationLevelUntil: Timestamp?

    public var id: ConversationID { conversation.id }

    public init(
        conversation: Conversation, isSynced: Bool, lastMessageID: MessageID? = nil, totalMessageCount: Int = 0,
        unreadMessageCount: Int = 0,
        nodeCounts: NodeCounts? = nil, totalNumberOfMessages: Int? = nil, totalNumberOfUnreadMessages: Int? = nil
    ) {
        self.conversation = conversation
        self.isSynced = isSynced
        self.lastMessageID = lastMessageID
        self.totalMessageCount = totalMessageCount
        self.unreadMessageCount = unreadMessageCount
        self.nodeCounts = nodeCounts
        self.totalNumberOfMessages = totalNumberOfMessages ?? totalMessageCount
        self.totalNumberOfUnreadMessages = totalNumberOfUnreadMessages ?? unreadMessageCount
    }
}

/// A conversation's counts for the local user as the node computes them (SPEC §6.4): every
/// message the user may see, the unread ones among them, and the latest. Correct whatever
/// part of the history this device holds.
public struct NodeCounts: Hashable, Sendable {
    public var messages: Int
    public var unread: Int
    public var lastMessageID: MessageID?

    public init(messages: Int, unread: Int, lastMessageID: MessageID? = nil) {
        self.messages = messages
        self.unread = unread
        self.lastMessageID = lastMessageID
    }
}

/// A message as the local store holds it: the model object plus when it arrived here,
/// whether the local user has read it, and the local state of each part.
public struct StoredMessage: Hashable, Sendable, Identifiable {
    public var message: Message
    /// When this device received the message (nil for messages sent from this device).
    public var receivedAt: Timestamp?
    /// Whether the local user has not read it yet. Never true for the user's own messages.
    public var isUnread: Bool
    /// The local state of each part, in the order of `message.parts`.
    public var partStates: [PartState]
    /// The reactions present on the message (SPEC §6.9): per key, the users who reacted with it.
    public var reactions: [String: Set<UserID>] = [:]
    /// When its sender last edited it (its parts replaced: the latest edit this device learned
    /// of, or made); nil when never edited.
    public var editedAt: Timestamp?

    public var id: MessageID { message.id }

    public init(
        message: Message, receivedAt: Timestamp?, isUnread: Bool, partStates: [PartState],
        reactions: [String: Set<UserID>] = [:]
    ) {
        self.message = message
        self.receivedAt = receivedAt
        self.isUnread = isUnread
        self.partStates = partStates
        self.reactions = reactions
    }
}

/// Where a part's content is on this device.
public enum TransferStatus: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Local rich content that has not started uploading.
    case awaitingUpload = 0
    /// Local rich content being uploaded.
    case uploading = 1
    /// Remote rich content not on this device.
    case readyForDownload = 2
    /// Remote rich content being downloaded.
    case downloading = 3
    /// The content is on this device (inline parts always are).
    case complete = 4

    public var description: String {
        switch self {
        case .awaitingUpload: "awaiting upload"
        case .uploading: "uploading"
        case .readyForDownload: "ready for download"
        case .downloading: "downloading"
        case .complete: "complete"
        }
    }
}

/// The local state of one part.
public struct PartState: Hashable, Sendable {
    public var partID: UUID
    public var transferStatus: TransferStatus
    /// The content file, relative to the store's content directory (rich content only).
    public var localPath: String?
    /// When the content was last read or written here (rich content only).
    public var lastAccess: Timestamp?
    /// Whether the content came here by auto-download.
    public var autoDownloaded: Bool
    /// Whether the content was purged from this device; purged content is not auto-downloaded again.
    public var purged: Bool

    public init(
        partID: UUID, transferStatus: TransferStatus, localPath: String? = nil, lastAccess: Timestamp? = nil,
        autoDownloaded: Bool = false, purged: Bool = false
    ) {
        self.partID = partID
        self.transferStatus = transferStatus
        self.localPath = localPath
        self.lastAccess = lastAccess
        self.autoDownloaded = autoDownloaded
        self.purged = purged
    }
}

/// Extra property names the client's object changes use, beyond the model's.
extension ConversationProperty {
    public static let deliveryReceiptsEnabled = "deliveryReceiptsEnabled"
    public static let readReceiptsEnabled = "readReceiptsEnabled"
    public static let isSynced = "isSynced"
    public static let totalMessageCount = "totalMessageCount"
    /// ``StoredConversation/totalNumberOfMessages``.
    public static let totalNumberOfMessages = "totalNumberOfMessages"
    /// ``StoredConversation/totalNumberOfUnreadMessages``.
    public static let totalNumberOfUnreadMessages = "totalNumberOfUnreadMessages"
}

extension MessageProperty {
    public static let isUnread = "isUnread"
    public static let receivedAt = "receivedAt"
    public static let push = "push"
}
