import Foundation
import GRDB
import LaminaModel

@testable import LaminaClient

/// A seeded random sequence of the store's writes, each one transaction, for
/// `ConversationCountsTests`: sends and their ACKs, messages of others (new and history),
/// reads (one by one, up to a position, from the feed), deletions (a message, below a
/// position, a conversation), distinct merges (into a conversation here, or a rename), the
/// node's counts and a snapshot's drops. Synchronous: run it on a thread of its own
/// (`onOwnThread`), not on Swift's cooperative pool, which other tests' streams need.
struct CountsRun {
    static let names: Set<String> = [
        "newConversation", "newLocalConversation", "send", "ack", "receive", "receiveBatch", "markRead", "readUpTo",
        "readFromFeed", "deleteMessage", "deleteBelow", "merge", "mergeRename", "deleteConversation", "nodeCounts",
        "dropMessages", "dropConversations",
    ]
    let store: LocalStore
    var random: SplitMix64
    /// The operations run so far that changed something to check.
    var done: Set<String> = []
    private var clock: UInt64 = 1_000

    init(store: LocalStore, seed: UInt64) {
        self.store = store
        self.random = SplitMix64(state: seed)  // QueryDiffTests's
    }

    /// Runs one random operation; returns its name.
    mutating func step() throws -> String {
        let live = try conversations("SELECT id FROM conversation WHERE merged_into IS NULL ORDER BY rowid")
        if live.count < 2 { return try newConversation(local: false) }
        let c = live[Int.random(in: 0..<live.count, using: &random)]
        let name = Self.weighted.randomElement(using: &random)!
        switch name {
        case "newConversation": return try newConversation(local: false)
        case "newLocalConversation": return try newConversation(local: true)
        case "send":
            try store.insertLocalMessage(
                Message(conversationID: c, sender: alice, parts: [try MessagePart(text: "mine")]))
        case "ack":
            guard let id = try pick(messages: "pos_physical IS NULL") else { return "ack (none)" }
            // As `acknowledgeSentMessageAsync`: the message as the node has it, its entry leaves.
            guard var sent = try store.message(id)?.message else { return "ack (none)" }
            sent.position = position(tick())
            sent.sentAt = Timestamp(millisecondsSince1970: Int64(clock))
            try store.apply([.message(sent, receivedAt: received)], acknowledged: id.uuid)
        case "receive":
            // New, or history older than what is held.
            let physical = Bool.random(using: &random) ? tick() : UInt64.random(in: 1..<clock, using: &random)
            let m = try remoteMessage(
                in: c, from: [bob, carol].randomElement(using: &random)!, at: physical,
                logical: UInt32.random(in: 0..<3, using: &random))
            try store.apply([.message(m, receivedAt: received), .messageCounted(c, m.id)])
        case "receiveBatch":
            let messages = try (0..<Int.random(in: 2...4, using: &random)).map { _ in
                try remoteMessage(in: c, at: tick())
            }
            var changes: [RemoteChange] = messages.map { .message($0, receivedAt: received) }
            changes.append(.messageDeleted(messages[0].id))
            try store.apply(changes)
        case "markRead":
            let unread = try messages("SELECT id FROM message WHERE is_unread = 1 ORDER BY rowid")
            guard !unread.isEmpty else { return "markRead (none)" }
            try store.markRead(Array(unread.shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random))))
        case "readUpTo":
            try store.apply([
                .statusUpTo(c, user: alice, status: .read, upTo: position(UInt64.random(in: 1...clock, using: &random)))
            ])
        case "readFromFeed":
            guard let id = try pick(messages: "is_unread = 1") else { return "readFromFeed (none)" }
            try store.apply([.readCounted(c, id), .recipientStatus(id, user: alice, status: .read)])
        case "deleteMessage":
            guard let id = try pick(messages: "1") else { return "deleteMessage (none)" }
            try store.apply([.messageDeleted(id)])
        case "deleteBelow":
            try store.apply([.messagesDeleted(c, below: position(UInt64.random(in: 1...clock / 4, using: &random)))])
        case "merge":
            let into = live.filter { $0 != c }.randomElement(using: &random)!
            try store.apply([.distinctMerge(from: c, into: into)])
        case "mergeRename":
            try store.apply([.distinctMerge(from: c, into: .random())])
        case "deleteConversation":
            try store.apply([.conversationDeleted(c)])
        case "nodeCounts":
            // The same draws, in the same order, as before the two receipt switches (the seeds'
            // runs stay what they were): one flag for both switches.
            let counts = NodeCounts(
                messages: Int.random(in: 0...50, using: &random), unread: Int.random(in: 0...10, using: &random))
            let receipts = Bool.random(using: &random)
            try store.apply([
                .counts(
                    c, counts, isDistinct: true, deliveryReceiptsEnabled: receipts, readReceiptsEnabled: receipts)
            ])
        case "dropMessages":
            let sent = try store.messages(in: c).filter { $0.message.isSent }.map(\.id)
            guard sent.count >= 2 else { return "dropMessages (none)" }
            try store.dropMessages(
                in: c, notIn: sent.filter { _ in Bool.random(using: &random) } + [sent.first!, sent.last!])
        case "dropConversations":
            try store.dropConversations(notIn: Set(live.filter { $0 != c }))
        default: preconditionFailure("unknown operation \(name)")
        }
        done.insert(name)
        return name
    }

    /// Compares every live conversation's stored summary, and every conversation's counts,
    /// with a scan of its messages; returns each difference.
    func mismatches() throws -> [String] {
        var out: [String] = []
        func expect(_ holds: Bool, _ what: @autoclosure () -> String) { if !holds { out.append(what()) } }
        for id in try conversations("SELECT id FROM conversation WHERE merged_into IS NULL") {
            guard let stored = try store.conversation(id) else {
                out.append("\(id) is not readable")
                continue
            }
            let scan = try scanned(store, id)
            expect(
                stored.totalMessageCount == scan.total, "\(id) total \(stored.totalMessageCount), scanned \(scan.total)"
            )
            expect(
                stored.unreadMessageCount == scan.unread,
                "\(id) unread \(stored.unreadMessageCount), scanned \(scan.unread)")
            expect(
                stored.lastMessageID == scan.lastMessageID,
                "\(id) last message \(String(describing: stored.lastMessageID)), scanned \(String(describing: scan.lastMessageID))"
            )
            expect(!scan.anySent || stored.isSynced, "\(id) holds a sent message and is not synced")
            expect(
                stored.totalNumberOfMessages == (stored.nodeCounts.map { $0.messages + scan.unsent } ?? scan.total),
                "\(id) totalNumberOfMessages \(stored.totalNumberOfMessages)")
            expect(
                stored.totalNumberOfUnreadMessages == (stored.nodeCounts?.unread ?? scan.unread),
                "\(id) totalNumberOfUnreadMessages \(stored.totalNumberOfUnreadMessages)")
        }
        // Tombstones, deleted conversations and one never stored too.
        for id in try conversations("SELECT id FROM conversation UNION SELECT conversation_id FROM message_count") + [
            .random()
        ] {
            let counted = try store.read { db in try ConversationSummary.read(db, id) }
            let scan = try scanned(store, id)
            expect(counted == scan, "\(id) counts \(counted), scanned \(scan)")
        }
        return out
    }

    private static let weighted: [String] = {
        var out: [String] = []
        for (name, weight) in [
            ("newConversation", 2), ("newLocalConversation", 1), ("send", 10), ("ack", 8), ("receive", 10),
            ("receiveBatch", 3),
            ("markRead", 4), ("readUpTo", 3), ("readFromFeed", 3), ("deleteMessage", 3), ("deleteBelow", 1),
            ("merge", 2),
            ("mergeRename", 1), ("deleteConversation", 1), ("nodeCounts", 2), ("dropMessages", 2),
            ("dropConversations", 1),
        ] {
            out += Array(repeating: name, count: weight)
        }
        return out
    }()

    private mutating func newConversation(local: Bool) throws -> String {
        let others: Set<UserID> = Bool.random(using: &random) ? [bob] : [bob, carol]
        if local {
            try store.insertLocalConversation(try conversation(others.union([alice]), creator: alice, distinct: false))
            done.insert("newLocalConversation")
            return "newLocalConversation"
        }
        try store.apply([.conversation(try conversation(others.union([alice])))])
        done.insert("newConversation")
        return "newConversation"
    }

    private mutating func tick() -> UInt64 {
        clock += UInt64.random(in: 1...5, using: &random)
        return clock
    }

    private mutating func pick(messages condition: String) throws -> MessageID? {
        try messages("SELECT id FROM message WHERE \(condition) ORDER BY rowid").randomElement(using: &random)
    }

    private func conversations(_ sql: String) throws -> [ConversationID] {
        try store.read { db in try Data.fetchAll(db, sql: sql).map { ConversationID(uuid: StoreCoding.uuid($0)) } }
    }

    private func messages(_ sql: String) throws -> [MessageID] {
        try store.read { db in try Data.fetchAll(db, sql: sql).map { MessageID(uuid: StoreCoding.uuid($0)) } }
    }
}
