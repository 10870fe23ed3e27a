import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// `StoredRowCounts`, what `lamina-bench channel` reports rows per message with, read through a
/// read-only connection of its own beside the store's writer.
@Suite struct StoredRowCountsTests {
    @Test func countsWhatAConversationMessageAndAChannelMessageWrite() async throws {
        try await withTemporaryStore { store, path in
            let users: [UserID] = ["alice", "bob", "carol"]
            let before = try StoredRowCounts.read(sqliteStoreAt: path)
            // A message to three participants: one message row and a feed entry for each.
            _ = try await store.write { tx in
                try tx.appendMessageCreated(
                    .random(), in: .random(), to: users, kind: 1, at: Timestamp(millisecondsSince1970: 1))
            }
            let afterFeed = try StoredRowCounts.read(sqliteStoreAt: path).since(before)
            #expect(afterFeed.feedEntries == 3 && afterFeed.channelMessages == 0)

            // A channel message: one row, whatever the members, and no feed entry.
            let channel = ChatChannel(
                id: .random(), name: try ChannelName("room"), creator: "alice",
                createdAt: Timestamp(millisecondsSince1970: 1))
            let start = try StoredRowCounts.read(sqliteStoreAt: path)
            try await store.write { tx in
                _ = try tx.createChannel(channel)
                for user in users { try tx.addChannelMember(user, to: channel.id, at: .now()) }
            }
            let joined = try StoredRowCounts.read(sqliteStoreAt: path)
            _ = try await store.write { tx in
                try tx.appendChannelMessage(
                    ChannelMessage(
                        id: .random(), channelID: channel.id, sender: "alice", sentAt: .now(),
                        position: HLCTimestamp(physical: 1, logical: 0, node: NodeID(1)), logSeq: 0,
                        parts: [MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("hi".utf8)))]))
            }
            let message = try StoredRowCounts.read(sqliteStoreAt: path).since(joined)
            #expect(message.channelMessages == 1 && message.feedEntries == 0 && message.messages == 0)
            #expect(joined.since(start).channelMessages == 0)
        }
    }
}
