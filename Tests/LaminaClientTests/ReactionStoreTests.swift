import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

/// Reactions in the device's store (SPEC §6.9): what the decoder makes of feed entries and of a
/// history answer, what a message shows, its object changes and the queries over it.
@Suite struct ReactionStoreTests {
    static func change(_ m: Message, _ user: UserID, _ key: String, present: Bool, seq: UInt64) -> Change {
        Change(
            seq: seq,
            event: .reactionsChanged(
                ReactionsChanged(
                    conversationID: m.conversationID, messageID: m.id, user: user, key: key, present: present,
                    at: HLCTimestamp(physical: 10, logical: 0, node: NodeID(1)),
                    removedTags: present ? [] : [HLCTimestamp(physical: 9, logical: 0, node: NodeID(1))])))
    }

    @Test func aHistoryAnswerReplacesAMessagesReactionsAndFeedEntriesChangeOne() throws {
        let c = try conversation([alice, bob])
        let m = try remoteMessage(in: c.id, text: "hi", at: 100)
        let other = try remoteMessage(in: c.id, text: "later", at: 200)
        // A history page: messages, then their reactions (seq 0), gathered per message.
        let page = ChangeDecoder.decode(
            [
                Change(seq: 0, event: .messageCreated(m)), Change(seq: 0, event: .messageCreated(other)),
                Self.change(m, bob, "+1", present: true, seq: 0), Self.change(m, alice, "+1", present: true, seq: 0),
            ], after: 4, localUser: alice, receivedAt: received)
        #expect(
            page.changes == [
                .message(m, receivedAt: received), .reactionsReplaced(m.id, ["+1": [alice, bob]]),
                .message(other, receivedAt: received), .reactionsReplaced(other.id, [:]),
            ])
        // Feed entries (and a history page's reactions whose message came in an earlier batch).
        let feed = ChangeDecoder.decode(
            [Self.change(m, bob, "+1", present: false, seq: 5), Self.change(other, bob, "ok", present: true, seq: 0)],
            after: 4, localUser: alice, receivedAt: received)
        #expect(
            feed.changes == [
                .reaction(m.id, user: bob, key: "+1", present: false),
                .reaction(other.id, user: bob, key: "ok", present: true),
            ])
        #expect(feed.cursor == 5)
    }

    @Test func messagesShowTheirReactionsNotifyAndAreQueryable() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, text: "hi", at: 100)
            let other = try remoteMessage(in: c.id, text: "later", at: 200)
            try store.apply([
                .conversation(c), .message(m, receivedAt: received), .message(other, receivedAt: received),
            ])

            let changes = try store.apply([
                .reaction(m.id, user: bob, key: "+1", present: true),
                .reaction(m.id, user: alice, key: "+1", present: true),
                .reaction(m.id, user: alice, key: "\u{1F389}", present: true),
                // Again, and on a message this device does not hold: nothing.
                .reaction(m.id, user: bob, key: "+1", present: true),
                .reaction(.random(), user: bob, key: "+1", present: true),
            ])
            #expect(changes.count == 3)
            #expect(changes.allSatisfy { $0.type == .update && $0.property == MessageProperty.reactions })
            #expect(changes.last?.after == .reactions(["+1": [alice, bob], "\u{1F389}": [alice]]))
            let shown = try #require(try store.message(m.id))
            #expect(shown.reactionCounts == ["+1": 2, "\u{1F389}": 1])
            #expect(shown.reactionKeys(of: alice) == ["+1", "\u{1F389}"])
            #expect(shown.reactionKeys(of: bob) == ["+1"])

            let mine = Query<StoredMessage>(predicate: .property(MessageProperty.reactedBy, .contains, .user(alice)))
            #expect(try store.execute(mine).map(\.id) == [m.id])
            let none = Query<StoredMessage>(predicate: .property(MessageProperty.reactionCount, .equalTo, .integer(0)))
            #expect(try store.execute(none).map(\.id) == [other.id])
            #expect(throws: ClientError.self) {
                try store.execute(
                    Query<StoredMessage>(predicate: .property(MessageProperty.reactedBy, .equalTo, .user(alice))))
            }

            // A remove, then a history answer's replacement.
            try store.apply([.reaction(m.id, user: alice, key: "\u{1F389}", present: false)])
            #expect(try store.message(m.id)?.reactions == ["+1": [alice, bob]])
            try store.apply([.reactionsReplaced(m.id, ["ok": [carol]])])
            #expect(try store.message(m.id)?.reactions == ["ok": [carol]])
            // The message's deletion takes its reactions with it.
            try store.apply([.messageDeleted(m.id)])
            #expect(try store.execute(mine).isEmpty)
        }
    }
}
