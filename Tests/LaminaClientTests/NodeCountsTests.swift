import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

/// The store keeps the node's counts (SPEC §6.4): set by `conversation-updated`, moved by the
/// feed's new messages and the user's own reads, each counted once, and shown as the docs'
/// `totalNumberOfMessages` / `totalNumberOfUnreadMessages` whatever part of the history is held.
@Suite struct NodeCountsTests {
    @Test func countsFromTheNodeMoveWithTheFeedOnce() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            // A conversation from the node counts from zero until the node says more.
            try store.apply([.conversation(c)])
            #expect(try store.conversation(c.id)?.nodeCounts == NodeCounts(messages: 0, unread: 0))
            // The node: 500 messages, 40 unread; the device holds one.
            let held = try remoteMessage(in: c.id, at: 100)
            try store.apply([
                .message(held, receivedAt: received),
                .counts(
                    c.id, NodeCounts(messages: 500, unread: 40, lastMessageID: held.id), isDistinct: true,
                    deliveryReceiptsEnabled: true, readReceiptsEnabled: true),
            ])
            var stored = try #require(try store.conversation(c.id))
            #expect(stored.totalMessageCount == 1 && stored.unreadMessageCount == 1)
            #expect(stored.totalNumberOfMessages == 500 && stored.totalNumberOfUnreadMessages == 40)

            // A new message from the feed: one more, one more unread; applied twice (a retry of
            // the same batch would be skipped by the cursor, and history is never counted).
            let fresh = try remoteMessage(in: c.id, at: 200)
            try store.apply([.message(fresh, receivedAt: received), .messageCounted(c.id, fresh.id)])
            try store.apply([.message(fresh, receivedAt: received)])
            stored = try #require(try store.conversation(c.id))
            #expect(stored.totalNumberOfMessages == 501 && stored.totalNumberOfUnreadMessages == 41)
            // The user's own message from another device: one more, no unread.
            let own = try remoteMessage(in: c.id, from: alice, at: 300)
            try store.apply([.message(own, receivedAt: received), .messageCounted(c.id, own.id)])
            #expect(try store.conversation(c.id)?.totalNumberOfUnreadMessages == 41)

            // Read here: one less at once; the feed's copy of that read is not counted again.
            #expect(try store.markRead([fresh.id]) == [fresh.id])
            #expect(try store.conversation(c.id)?.totalNumberOfUnreadMessages == 40)
            try store.apply([.readCounted(c.id, fresh.id), .recipientStatus(fresh.id, user: alice, status: .read)])
            #expect(try store.conversation(c.id)?.totalNumberOfUnreadMessages == 40)
            // Read on another device, held here unread: one less; not held here: one less.
            try store.apply([.readCounted(c.id, held.id), .recipientStatus(held.id, user: alice, status: .read)])
            #expect(try store.conversation(c.id)?.totalNumberOfUnreadMessages == 39)
            try store.apply([.readCounted(c.id, MessageID.random())])
            #expect(try store.conversation(c.id)?.totalNumberOfUnreadMessages == 38)

            // A message not sent yet counts in the total at once (the node's count does not hold it).
            try store.insertLocalMessage(
                Message(conversationID: c.id, sender: alice, parts: [try MessagePart(text: "draft")]))
            stored = try #require(try store.conversation(c.id))
            #expect(stored.totalNumberOfMessages == 503)
            // The user's total unread over conversations.
            let other = try conversation([alice, carol])
            try store.apply([
                .conversation(other),
                .counts(
                    other.id, NodeCounts(messages: 9, unread: 9), isDistinct: false, deliveryReceiptsEnabled: true,
                    readReceiptsEnabled: true),
            ])
            #expect(try store.conversation(other.id)?.conversation.isDistinct == false)
            #expect(try store.totalNumberOfUnreadMessages() == 38 + 9)
            #expect(try store.numberOfConversationsWithUnreadMessages() == 2)
            // The query sees the same numbers.
            let unread = try store.execute(
                Query<StoredConversation>(
                    predicate: .property(ConversationProperty.totalNumberOfUnreadMessages, .greaterThan, .integer(10))))
            #expect(unread.map(\.id) == [c.id])
        }
    }

    @Test func conversationsWaitingForTheirPolicyFillSurviveAReopen() async throws {
        try await withTemporaryDirectory { dir in
            let location = StoreLocation(dataDirectory: dir, user: alice)
            let ids = (0..<3).map { _ in ConversationID.random() }
            do {
                let store = try LocalStore(location: location)
                #expect(try store.pendingPolicyFills().isEmpty)
                try store.setPendingPolicyFills(ids)
                try store.removePendingPolicyFill(ids[1])
                try store.advancePolicyFill(
                    ids[2], after: MessagePosition(physical: 1_767_225_600_000, logical: 3, node: NodeID(7)))
                try store.close()
            }
            let store = try LocalStore(location: location)
            defer { try? store.close() }
            #expect(
                try store.pendingPolicyFills() == [
                    PendingPolicyFill(conversation: ids[0]),
                    PendingPolicyFill(
                        conversation: ids[2],
                        after: MessagePosition(physical: 1_767_225_600_000, logical: 3, node: NodeID(7))),
                ])
        }
    }

    @Test func aStoreTheNodeNeverToldCountsWhatItHolds() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, at: 100)
            // A conversation created on this device, its message not sent: no node counts yet.
            let local = try conversation([alice, bob], creator: alice, distinct: false)
            try store.insertLocalConversation(local)
            try store.insertLocalMessage(
                Message(conversationID: local.id, sender: alice, parts: [try MessagePart(text: "hi")]))
            let stored = try #require(try store.conversation(local.id))
            #expect(stored.nodeCounts == nil)
            #expect(stored.totalNumberOfMessages == 1 && stored.totalNumberOfUnreadMessages == 0)
            try store.apply([.conversation(c), .message(m, receivedAt: received)])
            // counted from zero: history is not counted
            #expect(try store.conversation(c.id)?.totalNumberOfMessages == 0)
        }
    }
}
