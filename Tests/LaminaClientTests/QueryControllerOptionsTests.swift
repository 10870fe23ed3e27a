import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

/// The query controller's `updatableProperties` and pagination window (Layer's
/// `LYRQueryController.updatableProperties` and `paginationWindow`).
@Suite struct QueryControllerOptionsTests {
    private func messages(in c: ConversationID) -> Query<StoredMessage> {
        Query(
            predicate: .compare("conversation", .equalTo, .conversation(c)),
            sortDescriptors: [QuerySortDescriptor("position")])
    }

    @Test func onlyChangesOfTheUpdatablePropertiesAreReportedAsUpdates() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob, carol])
            let a = try remoteMessage(in: c.id, at: 100)
            let b = try remoteMessage(in: c.id, at: 200)
            try store.apply([.conversation(c), .message(a, receivedAt: received), .message(b, receivedAt: received)])

            let reads = try QueryController(
                store: store, query: messages(in: c.id), updatableProperties: [MessageProperty.isUnread])
            let every = try QueryController(store: store, query: messages(in: c.id))
            #expect(try reads.start().map(\.id) == [a.id, b.id])
            #expect(try every.start().map(\.id) == [a.id, b.id])
            var readUpdates = reads.updates.makeAsyncIterator()
            var everyUpdates = every.updates.makeAsyncIterator()

            // Carol's status on `a` changes: an update for the plain controller only.
            try store.apply([.recipientStatus(a.id, user: carol, status: .delivered)])
            let status = try await nextUpdate(&everyUpdates)
            #expect(status.changes == QueryChanges(updates: [0]))
            // Reading `b`: an update for both. The first update `reads` reports is this one.
            try store.markRead([b.id])
            let read = try await nextUpdate(&readUpdates)
            #expect(read.changes == QueryChanges(updates: [1]))
            #expect(try await nextUpdate(&everyUpdates).changes == QueryChanges(updates: [1]))
            // The unreported change is still in the objects held.
            #expect(reads.objects[0].message.recipientStatus[carol] == .delivered)
            // Inserts are reported whatever the properties.
            let c3 = try remoteMessage(in: c.id, at: 300)
            try store.apply([.message(c3, receivedAt: received)])
            #expect(try await nextUpdate(&readUpdates).changes == QueryChanges(inserts: [2]))

            // From now on `reads` reports recipient status changes too.
            try reads.setUpdatableProperties([MessageProperty.isUnread, MessageProperty.recipientStatus])
            try store.apply([.recipientStatus(b.id, user: carol, status: .delivered)])
            #expect(try await nextUpdate(&readUpdates).changes == QueryChanges(updates: [1]))
            reads.stop()
            every.stop()
        }
    }

    @Test func updatablePropertiesAreChecked() async throws {
        try await withStore { store in
            let unknown = #expect(throws: ClientError.self) {
                try QueryController(
                    store: store, query: Query<StoredMessage>(), updatableProperties: ["isUnread", "colour"])
            }
            #expect(unknown?.code == .unknownProperty)
            #expect(throws: ClientError.self) {
                try QueryController(
                    store: store, query: Query<StoredConversation>(), updatableProperties: [MessageProperty.isUnread])
            }
            let fine = try QueryController(
                store: store, query: Query<StoredConversation>(),
                updatableProperties: [ConversationProperty.unreadMessageCount, ConversationProperty.lastMessage])
            #expect(
                fine.updatableProperties == [ConversationProperty.unreadMessageCount, ConversationProperty.lastMessage])
            #expect(throws: ClientError.self) { try fine.setUpdatableProperties(["nope"]) }
        }
    }

    @Test func aPaginationWindowHoldsTheLastOrFirstObjectsAndMoves() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let sent = try (1...5).map { try remoteMessage(in: c.id, text: "m\($0)", at: UInt64($0) * 100) }
            try store.apply([.conversation(c)] + sent.map { .message($0, receivedAt: received) })
            let ids = sent.map(\.id)

            // The last two messages, as a chat view opens.
            let controller = try QueryController(store: store, query: messages(in: c.id), paginationWindow: -2)
            #expect(try controller.start().map(\.id) == Array(ids[3...4]))
            #expect(controller.totalNumberOfObjects == 5)
            var updates = controller.updates.makeAsyncIterator()

            // A new message slides the window: the oldest held leaves, the new one comes in.
            let newest = try remoteMessage(in: c.id, text: "m6", at: 600)
            try store.apply([.message(newest, receivedAt: received)])
            var update = try await nextUpdate(&updates)
            #expect(update.changes == QueryChanges(deletes: [0], inserts: [1]))
            #expect(update.objects.map(\.id) == [ids[4], newest.id])
            #expect(controller.totalNumberOfObjects == 6)

            // One page more of older messages: inserted at the front.
            try controller.setPaginationWindow(-4)
            update = try await nextUpdate(&updates)
            #expect(update.changes == QueryChanges(inserts: [0, 1]))
            #expect(update.objects.map(\.id) == Array(ids[2...4]) + [newest.id])
            #expect(controller.paginationWindow == -4)

            // A window past the results holds them all; a positive one holds the first.
            try controller.setPaginationWindow(-100)
            update = try await nextUpdate(&updates)
            #expect(update.objects.map(\.id) == ids + [newest.id])
            try controller.setPaginationWindow(2)
            update = try await nextUpdate(&updates)
            #expect(update.objects.map(\.id) == Array(ids[0...1]))
            #expect(controller.totalNumberOfObjects == 6)
            try controller.setPaginationWindow(nil)
            update = try await nextUpdate(&updates)
            #expect(update.objects.count == 6)

            for bad in [0, Int.min, QueryLimits.maxLimit + 1, -(QueryLimits.maxLimit + 1)] {
                let error = #expect(throws: ClientError.self) { try controller.setPaginationWindow(bad) }
                #expect(error?.code == .invalidArgument)
            }
            #expect(controller.paginationWindow == nil)
            controller.stop()
        }
    }

    @Test func theWindowAppliesWithinTheQuerysOwnLimitAndOffset() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let sent = try (1...6).map { try remoteMessage(in: c.id, text: "m\($0)", at: UInt64($0) * 100) }
            try store.apply([.conversation(c)] + sent.map { .message($0, receivedAt: received) })
            var query = messages(in: c.id)
            query.offset = 1
            query.limit = 4  // m2...m5
            let last = try QueryController(store: store, query: query, paginationWindow: -3)
            #expect(try last.start().map(\.id) == sent[2...4].map(\.id))
            #expect(last.totalNumberOfObjects == 4)
            let first = try QueryController(store: store, query: query, paginationWindow: 3)
            #expect(try first.start().map(\.id) == sent[1...3].map(\.id))
            last.stop()
            first.stop()
        }
    }
}
