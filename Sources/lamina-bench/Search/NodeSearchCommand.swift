import ArgumentParser
import Foundation
import GRDB
import LaminaModel
import LaminaStore

/// `lamina-bench node-search`: the node's full-text search (`v26-message-search`, on SQLite
/// rebuilt by `v29-message-search-conversations`) over N messages, measured directly on the
/// store (no node, no network).
struct NodeSearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node-search",
        abstract: "Full-text search on the node's store of N messages: latency p50/p99, the index's size per message.",
        discussion: """
            Measured DIRECTLY ON THE STORE (NodeStore.read + StorageReader.searchMessages, the read SEARCH_MESSAGES \
            and the HTTP APIs run), not through a node: the network and the frames are not in the figures. \
            Fills a fresh store (SQLite file in a temporary directory, or --postgres URL: a database that must be \
            empty) with --messages messages of 8 to 24 words drawn from a vocabulary of --vocabulary words (Zipf-like, \
            as device-search), over --conversations conversations of 3 participants each among --users users, \
            --batch messages per write transaction (the real append path: appendMessage, with its index write). \
            Then --queries searches by random users (a common word, a rare word, two words, a 3-letter prefix), \
            limit 50, timed one by one. The index's size: SQLite, the pages of the FTS5 tables (dbstat); \
            PostgreSQL, the tsvector column plus its GIN index. \
            With --copies K (SQLite only; to reach a large store on a slow machine) only messages/K are appended \
            through the append path; the store is then closed and each of those messages copied K - 1 times in \
            SQL (a new id, the same conversation, sender and text, its own position; its index row inserted with \
            the copy's rowid and its conversation's token, as the append path writes it), so the store holds --messages messages, every text K \
            times. The report says so.
            """)

    @Option(help: "Messages on the node.") var messages = 1_000_000
    @Option(help: "Conversations they are spread over.") var conversations = 2_000
    @Option(help: "Users the participants are drawn from.") var users = 400
    @Option(help: "Distinct words.") var vocabulary = 20_000
    @Option(help: "Searches timed.") var queries = 1_000
    @Option(help: "Results per search.") var limit = 50
    @Option(help: "Messages per write transaction while filling.") var batch = 2_000
    @Option(help: "A PostgreSQL URL (an empty database) instead of a temporary SQLite file.") var postgres: String?
    @Option(help: "SQLite only: append messages/copies, then copy each copies - 1 times in SQL.") var copies = 1

    func validate() throws {
        guard messages >= 1, copies >= 1, messages % copies == 0, postgres == nil || copies == 1, conversations >= 1,
            users >= 3, vocabulary >= 10, queries >= 1, batch >= 1,
            (1...MessageSearchTerms.maxLimit).contains(limit)
        else { throw ValidationError("bad arguments") }
    }

    func run() async throws {
        var random = SystemRandomNumberGenerator()
        var words = SearchVocabulary(size: vocabulary)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lamina-node-search-\(UUID().uuidString.prefix(8))", isDirectory: true)
        let location: StoreLocation
        if let postgres {
            location = try StoreLocation(parsing: postgres)
        } else {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            location = .sqlite(path: directory.appendingPathComponent("node.sqlite").path)
        }
        defer { try? FileManager.default.removeItem(at: directory) }
        var store = try NodeStore(location: location)
        defer { try? store.close() }
        let appended = messages / copies

        // Conversations of 3 distinct users each.
        let node = NodeID(1)
        var members: [[UserID]] = []
        var created: [Conversation] = []
        for _ in 0..<conversations {
            var picked: Set<Int> = []
            while picked.count < 3 { picked.insert(Int.random(in: 0..<users, using: &random)) }
            let people = try picked.sorted().map { try UserID("u\($0)") }
            members.append(people)
            created.append(
                try Conversation(
                    creator: people[0], participants: Set(people.dropFirst()),
                    options: ConversationOptions(isDistinct: false), createdAt: Timestamp(millisecondsSince1970: 1_000))
            )
        }
        let ids = created.map(\.id)
        let all = created
        try await store.write { tx in
            for (i, c) in all.enumerated() {
                _ = try tx.createConversation(
                    c, hlc: HLCTimestamp(physical: 1_000 + UInt64(i), logical: 0, node: node), origin: node)
            }
        }

        let clock = ContinuousClock()
        let fillStarted = clock.now
        var i = 0
        while i < appended {
            var chunk: [Message] = []
            for k in i..<min(appended, i + batch) {
                let c = k % conversations
                let at = UInt64(2_000_000 + k)
                let text = words.text()
                chunk.append(
                    Message(
                        conversationID: ids[c], sender: members[c][k % 3], parts: [try MessagePart(text: text)],
                        sentAt: Timestamp(millisecondsSince1970: Int64(at)),
                        position: HLCTimestamp(physical: at, logical: 0, node: node)))
            }
            let appended = chunk
            try await store.write { tx in
                for m in appended { try tx.appendMessage(m, hlc: m.position!, origin: node) }
            }
            i += chunk.count
            if i % 100_000 < batch { FileHandle.standardError.write(Data("filled \(i)\n".utf8)) }
        }
        let fillSeconds = Double((clock.now - fillStarted) / .microseconds(1)) / 1e6
        if copies > 1, case .sqlite(let path) = location {
            // The copies copy the originals' index rows: none may still wait (`SearchBacklog`).
            try await store.write { tx in try tx.indexWaitingMessages() }
            try store.close()
            try Self.copy(path, times: copies - 1)
            store = try NodeStore(location: location)
        }

        let indexBytes = try await store.read { r in try r.searchIndexBytes() }

        var latencies: [Double] = []
        var found = 0
        for q in 0..<queries {
            let text = words.query(q)
            let user = try UserID("u\(Int.random(in: 0..<users, using: &random))")
            let search = NodeMessageSearch(try MessageSearchTerms(text), limit: limit)
            let started = clock.now
            let hits = try await store.searchRead { r in try r.searchMessages(search, for: user) }
            latencies.append(Double((clock.now - started) / .microseconds(1)))
            found += hits.count
        }
        latencies.sort()
        func pct(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        var line = "node-search (direct on the store, \(postgres == nil ? "sqlite" : "postgres")):"
        line += " messages=\(messages) conversations=\(conversations) users=\(users) vocabulary=\(vocabulary)"
        if copies > 1 {
            line += " appended=\(appended) copied_in_sql=\(messages - appended) (every text \(copies) times)"
        }
        line += String(format: " append_msgs_per_s=%.0f", Double(appended) / fillSeconds)
        line += String(
            format: " index_bytes=%d index_bytes_per_message=%.1f", indexBytes,
            Double(indexBytes) / Double(messages))
        line += String(
            format: " queries=%d mean_results=%.1f latency_ms p50=%.3f p90=%.3f p99=%.3f max=%.3f", queries,
            Double(found) / Double(queries), pct(0.5) / 1000, pct(0.9) / 1000, pct(0.99) / 1000,
            (latencies.last ?? 0) / 1000)
        print(line)
    }

    /// Copies every message of the SQLite store at `path` `times` times: copy k has a new id,
    /// logical position and HLC k, and its index row (the original's text and conversation
    /// token) under its own rowid; the search backlog's mark moves past the copies.
    static func copy(_ path: String, times: Int) throws {
        let queue = try DatabaseQueue(path: path)
        for k in 1...times {
            try queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO messages (id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at,
                            body, request_digest, origin_node, hlc_physical, hlc_logical, hlc_node, deleted)
                        SELECT randomblob(16), conversation_id, sender, pos_physical, ?, pos_node, sent_at, body, NULL,
                            origin_node, hlc_physical, ?, hlc_node, 0
                        FROM messages WHERE pos_logical = 0 ORDER BY rowid
                        """, arguments: [k, k])
                try db.execute(
                    sql: """
                        INSERT INTO message_search (rowid, body, conversation)
                        SELECT copy.rowid, c.c0, c.c1 FROM messages copy
                        JOIN messages original ON original.conversation_id = copy.conversation_id
                            AND original.pos_physical = copy.pos_physical AND original.pos_logical = 0
                            AND original.pos_node = copy.pos_node
                        JOIN message_search_content c ON c.id = original.rowid
                        WHERE copy.pos_logical = ?
                        """, arguments: [k])
                // The copies are indexed: the search backlog starts after them.
                try db.execute(sql: "UPDATE search_backlog SET indexed_through = (SELECT MAX(rowid) FROM messages)")
            }
            FileHandle.standardError.write(Data("copy \(k) of \(times) done\n".utf8))
        }
    }
}
