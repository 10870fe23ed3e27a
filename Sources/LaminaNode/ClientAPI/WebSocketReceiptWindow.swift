import LaminaModel
import LaminaWire

/// The messages one WebSocket connection has seen recently, per conversation, with each
/// recipient's status as this connection last reported it: what turns a receipt range into
/// per-message `recipient_status` patches.
///
/// Storage keeps receipts as ranges (SPEC §6.2: "`user` has read up to position p"), one feed
/// entry however many messages it covers; Layer's Client API reports a status per message. The
/// translation happens here, per connection, and is bounded: a range patches only the messages
/// of its conversation that are in this window (the last ``maxMessagesPerConversation``
/// messages this connection saw created, in the last ``maxConversations`` conversations it saw
/// messages in), so one receipt costs at most that many patches and the window at most
/// `maxConversations × maxMessagesPerConversation` entries, never a store write or read per
/// message. Older messages' statuses are what a client reads over REST. An idle connection's
/// window is empty.
struct WebSocketReceiptWindow {
    static let maxConversations = 16
    static let maxMessagesPerConversation = 32

    struct Entry {
        var id: MessageID
        var position: MessagePosition
        var sender: UserID
        var status: [UserID: RecipientStatus]
    }

    /// Conversations, least recently used first, each with its messages in position order.
    private(set) var conversations: [(id: ConversationID, messages: [Entry])] = []

    /// Records a message this connection sent a `create` (or a Message.create answer) for.
    mutating func record(_ message: Message) {
        guard let position = message.position else { return }
        var list = take(message.conversationID) ?? []
        guard !list.contains(where: { $0.id == message.id }) else {
            conversations.append((id: message.conversationID, messages: list))
            return
        }
        list.append(Entry(id: message.id, position: position, sender: message.sender, status: message.recipientStatus))
        list.sort { $0.position < $1.position }
        if list.count > Self.maxMessagesPerConversation {
            list.removeFirst(list.count - Self.maxMessagesPerConversation)
        }
        conversations.append((id: message.conversationID, messages: list))
        if conversations.count > Self.maxConversations {
            conversations.removeFirst(conversations.count - Self.maxConversations)
        }
    }

    /// `user` reached `status` up to `upTo` in `conversation`: the messages of the window whose
    /// status for `user` rises (not `user`'s own), updated.
    mutating func apply(_ range: StatusUpTo) -> [MessageID] {
        guard let index = conversations.firstIndex(where: { $0.id == range.conversationID }) else { return [] }
        var raised: [MessageID] = []
        for i in conversations[index].messages.indices {
            let entry = conversations[index].messages[i]
            guard entry.position <= range.upTo, entry.sender != range.user,
                (entry.status[range.user] ?? .pending) < range.status
            else { continue }
            conversations[index].messages[i].status[range.user] = range.status
            raised.append(entry.id)
        }
        return raised
    }

    /// One message's status for one user (a per-message change): whether it is news.
    mutating func apply(_ change: MessageStatusChanged) -> Bool {
        guard let index = conversations.firstIndex(where: { $0.id == change.conversationID }),
            let i = conversations[index].messages.firstIndex(where: { $0.id == change.messageID })
        else { return true }
        guard (conversations[index].messages[i].status[change.user] ?? .pending) < change.status else { return false }
        conversations[index].messages[i].status[change.user] = change.status
        return true
    }

    mutating func forget(_ conversation: ConversationID) { _ = take(conversation) }

    mutating func forget(_ message: MessageID, in conversation: ConversationID) {
        guard let index = conversations.firstIndex(where: { $0.id == conversation }) else { return }
        conversations[index].messages.removeAll { $0.id == message }
    }

    private mutating func take(_ conversation: ConversationID) -> [Entry]? {
        guard let index = conversations.firstIndex(where: { $0.id == conversation }) else { return nil }
        return conversations.remove(at: index).messages
    }
}
