import Foundation
import LaminaMerge
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// The node's full-text index (`v26-message-search`) and `searchMessages`, on both backends:
/// what is indexed, kept in the message's transaction, and found under `history()`'s rules.
@Suite struct MessageSearchStorageTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"
    let carol: UserID = "carol"
    let dave: UserID = "dave"

    func search(
        _ store: NodeStore, _ text: String, for user: UserID, in conversation: ConversationID? = nil, limit: Int = 50,
        offset: Int = 0
    ) async throws -> [String] {
        let query = NodeMessageSearch(try MessageSearchTerms(text), in: conversation, limit: limit, offset: offset)
        return try await store.searchRead { r in try r.searchMessages(query, for: user) }.map(Self.text)
    }

    /// A conversation of alice and bob holding one text message from `sender` at hlc(100),
    /// written in one group (the conversation at hlc(1)).
    @discardableResult
    static func oneMessage(_ text: String, from sender: UserID, in store: NodeStore) async throws -> Conversation {
        let c = try conversation("alice", ["bob"])
        let m = try textMessage(text, in: c.id, from: sender, at: hlc(100))
        try await store.write { tx in
            _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
            try tx.appendMessage(m, hlc: m.position!, origin: nodeA)
        }
        return c
    }

    static func text(_ message: Message) -> String {
        message.parts.compactMap { part in
            if case .inline(let bytes) = part.content, part.mimeType.rawValue.hasPrefix("text/") {
                return String(decoding: bytes, as: UTF8.self)
            }
            return nil
        }.joined(separator: "|")
    }

    @Test(arguments: StoreBackend.allCases) func findsWhatHistoryShowsAndNothingElse(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let group = try conversation(alice, [bob, carol], distinct: false)
            let other = try conversation(alice, [dave], distinct: false)
            let early = try textMessage("apple pie recipe", in: group.id, from: alice, at: hlc(100))
            let fromBob = try textMessage("Apple juice", in: group.id, from: bob, at: hlc(200))
            let late = try textMessage("apple cider", in: group.id, from: alice, at: hlc(300))
            let gone = try textMessage("apple gone", in: group.id, from: alice, at: hlc(310))
            let elsewhere = try textMessage("apple tart", in: other.id, from: dave, at: hlc(150))
            let binary = Message(
                conversationID: group.id, sender: alice,
                parts: [try MessagePart(mimeType: "application/json", bytes: Array("\"apple\"".utf8))],
                sentAt: Timestamp(millisecondsSince1970: 320), position: hlc(320))
            try await store.write { tx in
                _ = try tx.createConversation(group, hlc: hlc(1), origin: nodeA)
                _ = try tx.createConversation(other, hlc: hlc(2), origin: nodeA)
                for m in [early, fromBob, elsewhere] { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
                try tx.applyMembership(
                    .remove, user: carol, conversation: group.id, actor: alice, hlc: hlc(250), origin: nodeA)
                for m in [late, gone, binary] { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
                try tx.deleteMessage(gone.id)
                _ = try tx.block(bob, by: alice, at: Timestamp(millisecondsSince1970: 400))
            }
            // Bob: his conversation's messages, newest first among equal ranks; not the deleted
            // one, not the JSON part, not the other conversation's.
            #expect(
                Set(try await search(store, "apple", for: bob)) == ["apple pie recipe", "Apple juice", "apple cider"])
            // Carol was removed at 250: what came before only.
            #expect(Set(try await search(store, "apple", for: carol)) == ["apple pie recipe", "Apple juice"])
            // Alice blocks Bob: his message is left out, as history leaves it out.
            #expect(
                Set(try await search(store, "apple", for: alice)) == ["apple pie recipe", "apple cider", "apple tart"])
            #expect(try await search(store, "apple", for: alice, in: other.id) == ["apple tart"])
            #expect(try await search(store, "apple", for: dave) == ["apple tart"])
            #expect(try await search(store, "apple", for: "mallory") == [])
            // Every word, the last one a prefix; case does not matter.
            #expect(try await search(store, "APPLE re", for: bob) == ["apple pie recipe"])
            #expect(try await search(store, "recipe apple", for: bob) == ["apple pie recipe"])
            #expect(try await search(store, "gone", for: alice) == [])
            #expect(try await search(store, "json", for: alice) == [])
            // The search sees what history sees.
            let history = try await store.read { r in try r.history(of: group.id, for: carol, .last(50)) }
            #expect(Set(history.map(Self.text)).isSuperset(of: try await search(store, "apple", for: carol)))
        }
    }

    @Test(arguments: StoreBackend.allCases) func partUpdatesAndDeletionsKeepTheIndexExact(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            let edited = try textMessage("banana bread", in: c.id, from: alice, at: hlc(100))
            let old = try textMessage("banana split", in: c.id, from: bob, at: hlc(110))
            let kept = try textMessage("banana boat", in: c.id, from: bob, at: hlc(200))
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                for m in [edited, old, kept] { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
            }
            #expect(try await search(store, "banana", for: alice).count == 3)
            try await store.write { tx in
                let parts = [
                    try MessagePart(text: "cherry bread"),
                    try MessagePart(mimeType: "text/markdown", bytes: Array("*kiwi*".utf8)),
                ]
                let edit = MessagePartsEdit.diff(from: edited.parts, to: parts, at: hlc(500))
                #expect(try tx.applyPartsEdit(of: edited.id, edit, origin: nodeA, by: alice)?.after == parts)
            }
            #expect(try await search(store, "bread", for: alice) == ["cherry bread|*kiwi*"])
            #expect(try await search(store, "kiwi", for: bob) == ["cherry bread|*kiwi*"])
            #expect(Set(try await search(store, "banana", for: alice)) == ["banana split", "banana boat"])
            // A range deletion (history purged before 150) takes its messages out.
            try await store.write { tx in _ = try tx.deleteMessages(of: c.id, before: hlc(150)) }
            #expect(try await search(store, "banana", for: alice) == ["banana boat"])
            #expect(try await search(store, "cherry", for: alice) == [])
            // A replicated update of a deleted message does not bring it back.
            try await store.write { tx in
                let edit = MessagePartsEdit.diff(
                    from: old.parts, to: [try MessagePart(text: "banana again")], at: hlc(600))
                _ = try tx.applyPartsEdit(of: old.id, edit, origin: nodeB, by: bob, evenIfDeleted: true)
            }
            #expect(try await search(store, "again", for: alice) == [])
        }
    }

    @Test(arguments: StoreBackend.allCases) func ranksPagesAndRefusesBadPages(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            // The best match is the oldest: rank comes before recency.
            var messages = [try textMessage("plum plum plum", in: c.id, from: alice, at: hlc(100))]
            for i in 1...6 {
                messages.append(
                    try textMessage(
                        "plum and \(i) other words of filler text", in: c.id, from: bob, at: hlc(100 + UInt64(i))))
            }
            let all = messages
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                for m in all { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
            }
            let ranked = try await search(store, "plum", for: alice)
            #expect(ranked.first == "plum plum plum")
            #expect(ranked.count == 7)
            // Equal ranks: newer first.
            #expect(Array(ranked.dropFirst()) == (1...6).reversed().map { "plum and \($0) other words of filler text" })
            var paged: [String] = []
            for offset in stride(from: 0, to: 8, by: 3) {
                paged += try await search(store, "plum", for: alice, limit: 3, offset: offset)
            }
            #expect(paged == ranked)
            for (limit, offset) in [(0, 0), (MessageSearchTerms.maxLimit + 1, 0), (10, -1), (200, 801)] {
                #expect(
                    await storageErrorCode {
                        _ = try await search(store, "plum", for: alice, limit: limit, offset: offset)
                    }
                        == .invalidArgument)
            }
        }
    }

    /// A distinct merge moves the retired conversation's messages into the survivor: a search
    /// of the survivor alone finds them (on SQLite, their index rows take the survivor's token).
    @Test(arguments: StoreBackend.allCases) func aMergeMovesTheIndexWithTheMessages(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let survivor = try conversation(alice, [bob], distinct: false)
            let retired = try conversation(bob, [alice], distinct: false)
            try await store.write { tx in
                _ = try tx.createConversation(survivor, hlc: hlc(1), origin: nodeA)
                _ = try tx.createConversation(retired, hlc: hlc(2), origin: nodeB)
                try tx.appendMessage(
                    try textMessage("fig here", in: survivor.id, from: alice, at: hlc(10)), hlc: hlc(10), origin: nodeA)
                try tx.appendMessage(
                    try textMessage("fig there", in: retired.id, from: bob, at: hlc(11, 0, nodeB)),
                    hlc: hlc(11, 0, nodeB), origin: nodeB)
                try tx.retireConversation(retired.id, mergedInto: survivor.id)
            }
            #expect(try await search(store, "fig", for: alice, in: survivor.id) == ["fig there", "fig here"])
            #expect(try await search(store, "fig", for: bob) == ["fig there", "fig here"])
        }
    }

    /// The index also holds each message's conversation token (SQLite): a search reads words in
    /// the text only, so typing a token finds nothing.
    @Test(arguments: StoreBackend.allCases) func wordsAreSearchedInTheTextOnly(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try await Self.oneMessage("quince", from: alice, in: store)
            let token = withUnsafeBytes(of: c.id.uuid.uuid) { bytes in
                bytes[12...].map { String(format: "%02x", $0) }.joined()
            }
            if backend == .sqlite {
                let stored = try await store.searchRead { r in
                    try r.db.rows("SELECT conversation FROM message_search").map { $0[0] as String }
                }
                #expect(stored == [token], "the token the index holds is the one computed here")
            }
            #expect(try await search(store, token, for: alice) == [])
            #expect(try await search(store, String(token.prefix(3)), for: alice) == [])
            #expect(try await search(store, "quin", for: alice) == ["quince"])
        }
    }

    /// Control characters separate words (FuzzClientAPI found a NUL inside a word making FTS5's
    /// query a syntax error, answered 500): the words around them are searched as any.
    @Test(arguments: StoreBackend.allCases) func controlCharactersSeparateWords(_ backend: StoreBackend)
        async throws
    {
        #expect(try MessageSearchTerms("pear\u{0}\u{0}plum\u{7}").words == ["pear", "plum"])
        #expect(throws: ModelError.self) { try MessageSearchTerms("\u{0}\u{1}\u{1b}") }
        try await withTemporaryStore(backend: backend) { store, _ in
            try await Self.oneMessage("pear plum", from: alice, in: store)
            #expect(try await search(store, "pear\u{0}\u{0}\u{0}pl", for: alice) == ["pear plum"])
            #expect(try await search(store, "hello\u{FFFD}\u{0}\u{0}t", for: alice) == [])
        }
    }

    /// Past `narrowingAtMost` conversations the SQLite query reads every match on the node:
    /// the joins keep the same messages, in the same order.
    @Test(arguments: StoreBackend.allCases) func readingTheWholeIndexFindsTheSame(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let mine = try conversation(alice, [bob], distinct: false)
            let left = try conversation(alice, [carol], distinct: false)
            let theirs = try conversation(bob, [dave], distinct: false)
            let messages = [
                try textMessage("lime lime", in: mine.id, from: bob, at: hlc(100)),
                try textMessage("lime and soda", in: mine.id, from: alice, at: hlc(110)),
                try textMessage("lime before", in: left.id, from: carol, at: hlc(120)),
                try textMessage("lime after", in: left.id, from: carol, at: hlc(300)),
                try textMessage("lime elsewhere", in: theirs.id, from: dave, at: hlc(130)),
            ]
            try await store.write { tx in
                for (i, c) in [mine, left, theirs].enumerated() {
                    _ = try tx.createConversation(c, hlc: hlc(1 + UInt64(i)), origin: nodeA)
                }
                for m in messages.prefix(3) { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
                try tx.applyMembership(
                    .remove, user: alice, conversation: left.id, actor: carol, hlc: hlc(200), origin: nodeA)
                for m in messages.suffix(2) { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
            }
            let expected = ["lime lime", "lime before", "lime and soda"]
            for limit in [0, 1, 2, MessageSearchSchema.narrowedConversationsLimit] {
                let found = try await store.searchRead { r in
                    try r.searchMessages(
                        NodeMessageSearch(try MessageSearchTerms("lim")), for: alice, narrowingAtMost: limit)
                }
                #expect(found.map(Self.text) == expected, "narrowing at most \(limit)")
            }
        }
    }

    @Test func termsFollowTheDevicesRules() throws {
        #expect(try MessageSearchTerms("Hello, wor").words == ["Hello", "wor"])
        #expect(try MessageSearchTerms("say \"hi\"").fts5Expression == "\"say\" \"hi\"*")
        #expect(
            try MessageSearchTerms("it's a:b\\c").tsqueryExpression == "'it' & 's' & 'a' & 'b' & 'c':*",
            "quotes and backslashes are punctuation: they split words, so no word carries query syntax")
        for bad in [
            "", " ,.;", String(repeating: "a", count: MessageSearchTerms.maxTextBytes + 1),
            (0...MessageSearchTerms.maxWords).map { "w\($0)" }.joined(separator: " "),
        ] {
            #expect(throws: ModelError.self) { try MessageSearchTerms(bad) }
        }
    }

    @Test(arguments: StoreBackend.allCases) func backfillIndexesStoredMessagesInBatches(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            let messages = try (0..<5).map {
                try textMessage("grape \($0)", in: c.id, from: alice, at: hlc(100 + UInt64($0)))
            }
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                for m in messages { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
                try tx.deleteMessage(messages[4].id)
                // As a store from before v26: nothing indexed (on SQLite, nothing waiting either).
                switch tx.db.dialect {
                case .sqlite:
                    try tx.indexWaitingMessages()
                    try tx.db.run("DELETE FROM message_search")
                case .postgres: try tx.db.run("UPDATE messages SET search = NULL")
                }
            }
            #expect(try await search(store, "grape", for: alice) == [])
            try await store.write { tx in try MessageSearchSchema.backfill(tx.db, batch: 2) }
            #expect(Set(try await search(store, "grape", for: alice)) == ["grape 0", "grape 1", "grape 2", "grape 3"])
        }
    }

    /// A SQLite store from before v29 (v26's index: text only) is reindexed by the migration,
    /// tokens included, and searched as any other.
    @Test func v29RebuildsTheIndexOfAnOlderStore() async throws {
        let (location, cleanup) = try temporaryStoreLocation(.sqlite)
        defer { cleanup() }
        let c = try conversation(alice, [bob])
        let kept = try textMessage("peach kept", in: c.id, from: bob, at: hlc(100))
        let gone = try textMessage("peach gone", in: c.id, from: bob, at: hlc(110))
        var store = try NodeStore(location: location)
        try await store.write { tx in
            _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
            for m in [kept, gone] { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
            try tx.deleteMessage(gone.id)
            // Back to v26's table and its backfill; v29 not applied.
            try tx.db.run("DROP TABLE message_search")
            for statement in MessageSearchSchema.sqlite { try tx.db.run(statement) }
            try MessageSearchSchema.backfill(tx.db, conversations: false)
            try tx.db.run(
                "DELETE FROM grdb_migrations WHERE identifier = ?", [MessageSearchSchema.conversationsMigration])
        }
        #expect(
            await storageErrorCode { _ = try await search(store, "peach", for: alice) } != nil,
            "v26's table has no conversation column to search")
        try store.close()
        store = try NodeStore(location: location)
        defer { try? store.close() }
        #expect(try await search(store, "peach", for: alice) == ["peach kept"])
        #expect(try await search(store, "peach", for: alice, in: c.id) == ["peach kept"])
    }

    /// PostgreSQL's group commit holds the messages back and inserts them in one statement:
    /// their text is indexed by that statement.
    @Test func aGroupOfSendsIsIndexedByTheBatchInsertOnPostgres() async throws {
        try await withTemporaryStore(backend: .postgres) { store, _ in
            let c = try conversation(alice, [bob])
            try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
            let messages = try (0..<20).map {
                try textMessage("melon \($0)", in: c.id, from: alice, at: hlc(100 + UInt64($0)))
            }
            let gate = WriterGate()
            try gate.hold(store)
            await gate.entered.wait()
            let counter = CompletionCounter(expected: messages.count)
            for message in messages {
                try store.submit(
                    { tx in
                        try tx.appendMessage(message, hlc: message.position!, origin: nodeA)
                        return 0
                    }, completion: { counter.record($0) })
            }
            gate.open()
            await counter.done.wait()
            #expect(counter.successes == messages.count)
            #expect(try await search(store, "melon", for: bob, limit: 50).count == 20)
            #expect(try await search(store, "melon 7", for: bob) == ["melon 7"])
        }
    }
}
