import ArgumentParser
import Foundation
import GRDB
import LaminaClient
import LaminaModel
import LaminaProcess

/// `lamina-bench device-search`: the SDK's full-text search over N messages on one device.
struct DeviceSearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-search",
        abstract: "Full-text search on a device's store of N messages: latency p50/p99, the index's size per message.",
        discussion: """
            Fills a fresh client store (as sync would: LocalStore.apply, 10,000 changes per transaction) with \
            --messages messages of 8 to 24 words drawn from a vocabulary of --vocabulary words (Zipf-like: a few \
            common, most rare), over --conversations conversations; the same fill then runs on a second store \
            whose index triggers are dropped, to show what the index costs a write. Then --queries searches \
            (one word, two words, a prefix of 3 letters; common and rare words alike), limit 50, timed one by one \
            on the calling thread. The index's size is the pages of its FTS5 tables (dbstat) per message.
            """)

    @Option(help: "Messages on the device.") var messages = 100_000
    @Option(help: "Conversations they are spread over.") var conversations = 100
    @Option(help: "Distinct words.") var vocabulary = 20_000
    @Option(help: "Searches timed.") var queries = 1_000
    @Option(help: "Results per search.") var limit = 50

    func validate() throws {
        guard messages >= 1, conversations >= 1, vocabulary >= 10, queries >= 1,
            (1...MessageSearch.maxLimit).contains(limit)
        else { throw ValidationError("bad arguments") }
    }

    func run() async throws {
        var words = SearchVocabulary(size: vocabulary)
        let texts = (0..<messages).map { _ in words.text() }

        let indexed = try fill(texts, dropIndex: false)
        let plain = try fill(texts, dropIndex: true)
        defer {
            try? indexed.store.closeAndWipe()
            try? plain.store.closeAndWipe()
        }
        let indexPages = try Self.onFile(indexed.store) { db in
            try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'message_search%'")
                ?? 0
        }
        let fileBytes = { (store: LocalStore) -> Int in
            (try? Self.onFile(store) { db in
                (try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0)
                    * (try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0)
            }) ?? 0
        }

        // Queries: a common word, a rare word, two words, a 3-letter prefix.
        var latencies: [Double] = []
        var found = 0
        let clock = ContinuousClock()
        for q in 0..<queries {
            let text = words.query(q)
            let started = clock.now
            let hits = try indexed.store.searchMessages(MessageSearch(text, limit: limit))
            latencies.append(Double((clock.now - started) / .microseconds(1)))
            found += hits.count
        }
        latencies.sort()
        func pct(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        var line = "device-search: messages=\(messages) conversations=\(conversations) vocabulary=\(vocabulary)"
        line += String(
            format: " fill_msgs_per_s indexed=%.0f unindexed=%.0f", Double(messages) / indexed.seconds,
            Double(messages) / plain.seconds)
        line += String(
            format: " index_bytes=%d index_bytes_per_message=%.1f store_bytes indexed=%d unindexed=%d", indexPages,
            Double(indexPages) / Double(messages), fileBytes(indexed.store), fileBytes(plain.store))
        line += String(
            format: " queries=%d mean_results=%.1f latency_ms p50=%.3f p90=%.3f p99=%.3f max=%.3f", queries,
            Double(found) / Double(queries), pct(0.5) / 1000, pct(0.9) / 1000, pct(0.99) / 1000,
            (latencies.last ?? 0) / 1000)
        print(line)
    }

    /// Runs `body` on a connection of its own to `store`'s database file (the bench looks at
    /// what the SDK does not expose: the index's pages, its triggers).
    static func onFile<T>(_ store: LocalStore, _ body: (Database) throws -> T) throws -> T {
        try DatabaseQueue(path: store.location.databaseURL.path).write(body)
    }

    /// A fresh store filled with `texts` as synced messages; `dropIndex` removes the index's
    /// triggers first. Returns the store and the fill's seconds.
    private func fill(_ texts: [String], dropIndex: Bool) throws -> (store: LocalStore, seconds: Double) {
        let dir = ScratchDirectory.make("lamina-device-search")
        let store = try LocalStore(location: StoreLocation(dataDirectory: dir, user: "reader"))
        if dropIndex {
            try Self.onFile(store) { db in
                for trigger in ["part_insert", "part_delete", "part_update", "message_delete"] {
                    try db.execute(sql: "DROP TRIGGER message_search_\(trigger)")
                }
            }
        }
        var changes: [RemoteChange] = []
        var ids: [ConversationID] = []
        for c in 0..<conversations {
            let conversation = try Conversation(
                creator: "reader", participants: ["reader", try UserID("u\(c)")],
                options: ConversationOptions(isDistinct: true), createdAt: Timestamp(millisecondsSince1970: 1_000))
            ids.append(conversation.id)
            changes.append(.conversation(conversation))
        }
        try store.apply(changes)
        let started = ContinuousClock.now
        var batch: [RemoteChange] = []
        for (i, text) in texts.enumerated() {
            let at = UInt64(1_000_000 + i)
            let message = Message(
                conversationID: ids[i % ids.count], sender: try UserID("u\(i % ids.count)"),
                parts: [try MessagePart(text: text)], sentAt: Timestamp(millisecondsSince1970: Int64(at)),
                position: MessagePosition(physical: at, logical: 0, node: NodeID(1)))
            batch.append(.message(message, receivedAt: Timestamp(millisecondsSince1970: Int64(at))))
            if batch.count == LocalStore.maxChangesPerApply {
                try store.apply(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try store.apply(batch) }
        return (store, Double((ContinuousClock.now - started) / .microseconds(1)) / 1e6)
    }
}
