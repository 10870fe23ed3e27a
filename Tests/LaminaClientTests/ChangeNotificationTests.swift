import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

final class RecordingDelegate: LaminaClientDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var batches: [[ObjectChange]] = []
    private var waiter: CheckedContinuation<[[ObjectChange]], Never>?
    private var wanted = 0

    func objectsDidChange(_ changes: [ObjectChange]) {
        let resume: (CheckedContinuation<[[ObjectChange]], Never>, [[ObjectChange]])? = lock.withLock {
            batches.append(changes)
            if let w = waiter, batches.count >= wanted {
                waiter = nil
                return (w, batches)
            }
            return nil
        }
        if let (w, b) = resume { w.resume(returning: b) }
    }

    /// Waits until `count` batches have arrived (delegate calls are asynchronous).
    func batches(count: Int) async -> [[ObjectChange]] {
        await withCheckedContinuation { continuation in
            let ready: [[ObjectChange]]? = lock.withLock {
                if batches.count >= count { return batches }
                wanted = count
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

@Suite struct ChangeNotificationTests {
    private func update(_ changes: [ObjectChange], _ property: String) throws -> ObjectChange {
        let matching = changes.filter { $0.type == .update && $0.property == property }
        #expect(matching.count == 1, "expected one update of \(property)")
        return try #require(matching.first)
    }

    @Test func createsUpdatesAndDeletesCarryBeforeAndAfter() async throws {
        try await withStore { store in
            let stream = store.changes()
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, at: 100)

            var batch = try store.apply([.conversation(c), .message(m, receivedAt: received)])
            #expect(batch.map(\.type) == [.create, .create])
            #expect(batch[0].object == .conversation(c))
            #expect(batch[1].object == .message(m))

            // Conversation properties, each with its before and after.
            let path = try MetadataKeyPath(parsing: "title")
            batch = try store.apply([.metadata(c.id, path: path, value: .string("Lunch"))])
            var change = try update(batch, ConversationProperty.metadata)
            #expect(change.before == .metadata([:]))
            #expect(change.after == .metadata(["title": .string("Lunch")]))

            batch = try store.apply([.participants(c.id, added: [carol], removed: [])])
            change = try update(batch, ConversationProperty.participants)
            #expect(change.before == .participants([alice, bob]))
            #expect(change.after == .participants([alice, bob, carol]))
            change = try update(batch, ConversationProperty.isDistinct)
            #expect(change.before == .bool(true) && change.after == .bool(false))

            var receiptsOff = try #require(try store.conversation(c.id)).conversation
            receiptsOff.deliveryReceiptsEnabled = false
            batch = try store.apply([.conversation(receiptsOff)])
            change = try update(batch, ConversationProperty.deliveryReceiptsEnabled)
            #expect(change.before == .bool(true) && change.after == .bool(false))
            // Back on: with receipts off, others' statuses are `invalid` (SPEC §6.2).
            receiptsOff.deliveryReceiptsEnabled = true
            try store.apply([.conversation(receiptsOff)])

            // Message properties.
            batch = try store.apply([.recipientStatus(m.id, user: carol, status: .delivered)])
            change = try update(batch, MessageProperty.recipientStatus)
            #expect(change.before == .recipientStatus(m.recipientStatus))
            #expect(change.after == .recipientStatus(m.recipientStatus.merging([carol: .delivered]) { $1 }))

            #expect(try store.markRead([m.id]) == [m.id])
            let readBatch = try await collectChanges(stream) { all in
                all.contains { $0.property == MessageProperty.isUnread }
            }
            change = try update(readBatch, MessageProperty.isUnread)
            #expect(change.before == .bool(true) && change.after == .bool(false))
            change = try update(readBatch, ConversationProperty.unreadMessageCount)
            #expect(change.before == .integer(1) && change.after == .integer(0))

            // A message this device sends is acknowledged: position, sent at, isSent.
            let mine = Message(conversationID: c.id, sender: alice, parts: [try MessagePart(text: "yo")])
            try store.insertLocalMessage(mine)
            var acked = mine
            acked.position = position(200)
            acked.sentAt = Timestamp(millisecondsSince1970: 200)
            acked.recipientStatus = [alice: .read, bob: .pending, carol: .pending]
            batch = try store.apply([.message(acked, receivedAt: received)])
            change = try update(batch, MessageProperty.position)
            #expect(change.before == nil && change.after == .position(position(200)))
            change = try update(batch, MessageProperty.sentAt)
            #expect(change.before == nil && change.after == .timestamp(Timestamp(millisecondsSince1970: 200)))
            change = try update(batch, MessageProperty.isSent)
            #expect(change.before == .bool(false) && change.after == .bool(true))

            // Parts replaced through the Server API show as a parts update.
            var edited = try #require(try store.message(m.id)).message
            edited.parts = [try MessagePart(text: "edited")]
            batch = try store.apply([.message(edited, receivedAt: received)])
            change = try update(batch, MessageProperty.parts)
            #expect(change.before == .parts(m.parts) && change.after == .parts(edited.parts))

            // Deletes: the message, then the conversation with its remaining messages.
            batch = try store.apply([.messageDeleted(m.id)])
            #expect(batch.first?.type == .delete && batch.first?.messageID == m.id)
            change = try update(batch, ConversationProperty.totalMessageCount)
            #expect(change.before == .integer(2) && change.after == .integer(1))
            batch = try store.apply([.conversationDeleted(c.id)])
            #expect(batch.map(\.type) == [.delete, .delete])
            #expect(batch[0].messageID == mine.id)
            #expect(batch[1].conversationID == c.id)
        }
    }

    @Test func streamAndDelegateReceiveBatchesInCommitOrder() async throws {
        try await withStore { store in
            let delegate = RecordingDelegate()
            store.addDelegate(delegate)
            let stream = store.changes()
            let c = try conversation([alice, bob])
            let messages = try (1...5).map { try remoteMessage(in: c.id, at: UInt64($0 * 10)) }
            try store.apply([.conversation(c)])
            for m in messages { try store.apply([.message(m, receivedAt: received)]) }
            let fromStream = try await collectChanges(stream) { all in all.filter { $0.type == .create }.count == 6 }
            let creates = fromStream.filter { $0.type == .create }
            #expect(creates.first?.conversationID == c.id)
            #expect(creates.dropFirst().map(\.messageID) == messages.map(\.id))
            let fromDelegate = await delegate.batches(count: 6)
            #expect(fromDelegate.count == 6)
            #expect(fromDelegate.flatMap { $0 } == fromStream)
        }
    }

    @Test func waitForCreationFindsAnObjectAlreadyStored() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            try store.apply([.conversation(c)])
            let found = try await store.waitForCreation(of: c.id, timeout: .seconds(5))
            #expect(found.conversation == c)
        }
    }

    @Test func waitForCreationSeesAnObjectThatArrivesLater() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, at: 1)
            try store.apply([.conversation(c)])
            // The message is created only after the waiter has looked and missed.
            let (missed, signal) = AsyncStream<Void>.makeStream()
            async let waited = store.waitForCreation(of: m.id, timeout: .seconds(10), afterLookUp: { signal.yield() })
            for await _ in missed { break }
            try store.apply([.message(m, receivedAt: received)])
            let found = try await waited
            #expect(found.message == m)
        }
    }

    @Test func anObjectCreatedBetweenTheLookUpAndTheWaitIsNotLost() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            // The create commits in the window a lost-wakeup bug would miss: after the look-up
            // has missed, before the wait has started. The subscription made first holds it.
            let found = try await store.waitForCreation(
                of: c.id, timeout: .seconds(10),
                afterLookUp: {
                    _ = try? store.apply([.conversation(c)])
                })
            #expect(found.conversation == c)
        }
    }

    @Test func aSubscriberThatFallsTooFarBehindSeesItsStreamEnd() async throws {
        try await withTemporaryDirectory { dir in
            let store = try LocalStore(
                location: StoreLocation(dataDirectory: dir, user: alice),
                configuration: StoreConfiguration(changeBufferLimit: 2))
            defer { try? store.close() }
            let stream = store.changes()
            for i in 0..<4 { try store.apply([.conversation(try conversation([alice, bob], createdAt: Int64(i)))]) }
            var received = 0
            for await _ in stream { received += 1 }  // ends: it does not hang
            #expect(received == 2)
            #expect(throws: ClientError.self) {
                try LocalStore(
                    location: StoreLocation(dataDirectory: dir, user: bob),
                    configuration: StoreConfiguration(changeBufferLimit: 0))
            }
        }
    }

    @Test func aLocalConversationReportsWhenItBecomesSynced() async throws {
        try await withStore { store in
            let stream = store.changes()
            let c = try conversation([bob], creator: alice)
            try store.insertLocalConversation(c)
            let mine = Message(conversationID: c.id, sender: alice, parts: [try MessagePart(text: "hi")])
            try store.insertLocalMessage(mine)
            var acked = mine
            acked.position = position(10)
            acked.sentAt = Timestamp(millisecondsSince1970: 10)
            try store.apply([.message(acked, receivedAt: received)])
            let all = try await collectChanges(stream) { $0.contains { $0.property == ConversationProperty.isSynced } }
            #expect(all.first?.type == .create && all.first?.conversationID == c.id)
            let synced = try #require(all.first { $0.property == ConversationProperty.isSynced })
            #expect(synced.before == .bool(false) && synced.after == .bool(true))
            let total = try #require(all.first { $0.property == ConversationProperty.totalMessageCount })
            #expect(total.before == .integer(0) && total.after == .integer(1))
            let last = try #require(all.first { $0.property == ConversationProperty.lastMessage })
            #expect(last.before == nil && last.after == .string(mine.id.url))
        }
    }

    @Test func waitForCreationFollowsAMergeToItsIdentifier() async throws {
        try await withStore { store in
            let loser = try conversation([alice, bob], creator: alice)
            try store.insertLocalConversation(loser)
            let survivorID = ConversationID.random()
            let (missed, signal) = AsyncStream<Void>.makeStream()
            async let waited = store.waitForCreation(
                of: survivorID, timeout: .seconds(10), afterLookUp: { signal.yield() })
            for await _ in missed { break }
            try store.apply([.distinctMerge(from: loser.id, into: survivorID)])
            #expect(try await waited.id == survivorID)
        }
    }

    @Test func waitForCreationTimesOutWithAClearError() async throws {
        try await withStore { store in
            let id = MessageID.random()
            let error = await #expect(throws: ClientError.self) {
                try await store.waitForCreation(of: id, timeout: .milliseconds(50))
            }
            #expect(error?.code == .timedOut)
            #expect(error?.reason.contains(id.url) == true)
            let bad = await #expect(throws: ClientError.self) {
                try await store.waitForCreation(of: id, timeout: .seconds(-1))
            }
            #expect(bad?.code == .invalidSetting)
        }
    }
}
