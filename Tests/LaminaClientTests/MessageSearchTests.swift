import Foundation
import GRDB
import LaminaModel
import Testing

@testable import LaminaClient

/// The device's full-text search (issue 38 item 5): what it finds, and that the index follows
/// every way a message changes or goes.
@Suite struct MessageSearchTests {
    func ids(_ store: LocalStore, _ text: String, in c: ConversationID? = nil) throws -> [MessageID] {
        try store.searchMessages(MessageSearch(text, in: c)).map(\.message.id)
    }

    @Test func findsByWordsPrefixAndDiacriticsWithinAConversation() async throws {
        try await withStore { store in
            let c1 = try conversation([alice, bob])
            let c2 = try conversation([alice, carol], createdAt: 2_000)
            let lunch = try remoteMessage(in: c1.id, text: "Lunch on Friday at the café?", at: 100)
            let dinner = try remoteMessage(in: c1.id, text: "dinner friday instead", at: 200)
            let other = try remoteMessage(in: c2.id, from: carol, text: "friday standup moved", at: 150)
            try store.apply([
                .conversation(c1), .conversation(c2), .message(lunch, receivedAt: received),
                .message(dinner, receivedAt: received), .message(other, receivedAt: received),
            ])
            #expect(Set(try ids(store, "friday")) == [lunch.id, dinner.id, other.id])
            #expect(try ids(store, "fri").count == 3, "the last word is a prefix")
            #expect(try ids(store, "cafe") == [lunch.id], "diacritics folded")
            #expect(try ids(store, "lunch FRIDAY") == [lunch.id], "every word, any case")
            #expect(Set(try ids(store, "friday", in: c1.id)) == [lunch.id, dinner.id])
            #expect(try ids(store, "breakfast").isEmpty)
            // Query syntax in the user's text is only text: quotes, brackets, operators.
            #expect(try ids(store, "lunch \"on\" (friday") == [lunch.id])
            #expect(try ids(store, "lunch OR dinner").isEmpty, "OR is a word here, and no message has it")
            #expect(try ids(store, "NEAR(lunch dinner)").isEmpty)
        }
    }

    @Test func onlyTextPartsAreIndexed() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            var m = try remoteMessage(in: c.id, text: "plain words", at: 100)
            m.parts.append(try MessagePart(mimeType: "application/json", bytes: Array(#"{"secret":"hidden"}"#.utf8)))
            m.parts.append(richPart("text/plain", size: 10_000))
            try store.apply([.conversation(c), .message(m, receivedAt: received)])
            #expect(try ids(store, "plain") == [m.id])
            #expect(try ids(store, "hidden").isEmpty)
        }
    }

    @Test func theIndexFollowsPartUpdatesDeletionsAndPurges() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let first = try remoteMessage(in: c.id, text: "alpha one", at: 100)
            let last = try remoteMessage(in: c.id, text: "omega two", at: 300)
            try store.apply([
                .conversation(c), .message(first, receivedAt: received), .message(last, receivedAt: received),
            ])
            try store.apply([.messageParts(first.id, parts: [try MessagePart(text: "beta one")])])
            #expect(try ids(store, "alpha").isEmpty)
            #expect(try ids(store, "beta") == [first.id])
            #expect(try ids(store, "one") == [first.id])
            // The message with the highest rowid goes: a new message may get its rowid back,
            // and must not match the old words.
            try store.apply([.messageDeleted(last.id)])
            #expect(try ids(store, "omega").isEmpty)
            let next = try remoteMessage(in: c.id, text: "gamma three", at: 400)
            try store.apply([.message(next, receivedAt: received)])
            #expect(try ids(store, "omega").isEmpty)
            #expect(try ids(store, "two").isEmpty)
            #expect(try ids(store, "gamma") == [next.id])
            // A history purge and a conversation deletion take their messages out of the index.
            try store.apply([.messagesDeleted(c.id, below: position(350))])
            #expect(try ids(store, "beta").isEmpty)
            try store.apply([.conversationDeleted(c.id)])
            #expect(try ids(store, "gamma").isEmpty)
            let rows = try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM message_search_docsize") }
            #expect(rows == 0, "every indexed row was removed with its exact text")
        }
    }

    @Test func pagesAndRanking() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            var changes: [RemoteChange] = [.conversation(c)]
            for i in 0..<30 {
                let text = i == 7 ? "report report report due" : "weekly report number \(i) with other words"
                changes.append(
                    .message(try remoteMessage(in: c.id, text: text, at: UInt64(100 + i)), receivedAt: received))
            }
            try store.apply(changes)
            let firstPage = try store.searchMessages(MessageSearch("report", limit: 10))
            let secondPage = try store.searchMessages(MessageSearch("report", limit: 10, offset: 10))
            #expect(firstPage.count == 10 && secondPage.count == 10)
            #expect(Set(firstPage.map(\.message.id)).isDisjoint(with: secondPage.map(\.message.id)))
            #expect(
                firstPage.first?.message.parts.first.map { String(decoding: $0.inlineBytes ?? [], as: UTF8.self) }
                    == "report report report due", "the densest match first")
        }
    }

    @Test func limitsAreEnforcedBeforeTheQuery() async throws {
        try await withStore { store in
            for bad in [
                MessageSearch(String(repeating: "a", count: MessageSearch.maxTextBytes + 1)),
                MessageSearch(Array(repeating: "w", count: MessageSearch.maxWords + 1).joined(separator: " ")),
                MessageSearch("  ... !! "), MessageSearch("ok", limit: 0),
                MessageSearch("ok", limit: MessageSearch.maxLimit + 1),
                MessageSearch("ok", offset: -1),
            ] {
                #expect(throws: ClientError.self) { try store.searchMessages(bad) }
            }
        }
    }
}
