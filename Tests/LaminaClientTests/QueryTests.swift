import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

/// Three conversations and five messages, one of them not yet sent.
struct QueryFixture {
    let c1: Conversation, c2: Conversation, c3: Conversation
    let m1: Message, m2: Message, m3: Message, m4: Message, m5: Message

    init(_ store: LocalStore) throws {
        c1 = try conversation([alice, bob], metadata: ["title": .string("Lunch plans")], createdAt: 1_000)
        c2 = try conversation(
            [alice, bob, carol], distinct: false,
            metadata: ["title": .string("Dinner"), "style": .dictionary(["color": .string("red")])], createdAt: 2_000)
        c3 = try conversation([alice, carol], createdAt: 3_000)
        m1 = try remoteMessage(in: c1.id, from: bob, text: "one", at: 100)
        m2 = try remoteMessage(in: c1.id, from: alice, text: "two", at: 200)
        m3 = try remoteMessage(in: c1.id, from: bob, text: "three", at: 300)
        m4 = try remoteMessage(in: c2.id, from: carol, text: "four", at: 150)
        try store.apply([
            .conversation(c1), .conversation(c2), .conversation(c3),
            .message(m1, receivedAt: received), .message(m2, receivedAt: received),
            .message(m3, receivedAt: received), .message(m4, receivedAt: received),
        ])
        var pending = Message(conversationID: c3.id, sender: alice, parts: [try MessagePart(text: "five")])
        pending = try store.insertLocalMessage(pending).message
        m5 = pending
    }
}

@Suite struct QueryTests {
    typealias MQ = Query<StoredMessage>
    typealias CQ = Query<StoredConversation>

    private func messages(
        _ store: LocalStore, _ p: QueryPredicate, sort: [QuerySortDescriptor] = [QuerySortDescriptor("position")]
    ) throws -> [MessageID] {
        try store.identifiers(MQ(predicate: p, sortDescriptors: sort))
    }

    private func conversations(_ store: LocalStore, _ p: QueryPredicate) throws -> Set<ConversationID> {
        Set(try store.identifiers(CQ(predicate: p)))
    }

    private func t(_ ms: Int64) -> QueryValue { .timestamp(Timestamp(millisecondsSince1970: ms)) }

    @Test func everyComparisonOperatorOnMessages() async throws {
        try await withStore { store in
            let f = try QueryFixture(store)
            #expect(try messages(store, .compare("sentAt", .equalTo, t(200))) == [f.m2.id])
            #expect(
                try messages(store, .compare("sentAt", .notEqualTo, t(200))) == [f.m1.id, f.m4.id, f.m3.id, f.m5.id])
            #expect(try messages(store, .compare("sentAt", .lessThan, t(200))) == [f.m1.id, f.m4.id])
            #expect(try messages(store, .compare("sentAt", .lessThanOrEqualTo, t(200))) == [f.m1.id, f.m4.id, f.m2.id])
            #expect(try messages(store, .compare("sentAt", .greaterThan, t(200))) == [f.m3.id])
            #expect(try messages(store, .compare("sentAt", .greaterThanOrEqualTo, t(200))) == [f.m2.id, f.m3.id])
            #expect(
                try messages(store, .compare("sentAt", .in, .list([t(100), t(300), t(999)]))) == [f.m1.id, f.m3.id])
            #expect(
                try messages(store, .compare("sentAt", .notIn, .list([t(100), t(300)]))) == [f.m4.id, f.m2.id, f.m5.id])
            #expect(try messages(store, .compare("sentAt", .in, .list([]))) == [])
            #expect(try messages(store, .compare("sentAt", .equalTo, .null)) == [f.m5.id])
            #expect(try messages(store, .compare("sentAt", .notEqualTo, .null)).count == 4)
            #expect(try messages(store, .compare("sender", .like, .string("B%"))) == [f.m1.id, f.m3.id])
            #expect(try messages(store, .compare("sender", .like, .string("_aro_"))) == [f.m4.id])
            #expect(
                try messages(store, .compare("sender", .in, .list([.user(carol), .user(alice)]))) == [
                    f.m4.id, f.m2.id, f.m5.id,
                ])
            #expect(
                try messages(store, .compare("conversation", .equalTo, .conversation(f.c1.id))) == [
                    f.m1.id, f.m2.id, f.m3.id,
                ])
            #expect(try messages(store, .compare("identifier", .equalTo, .message(f.m4.id))) == [f.m4.id])
            #expect(try messages(store, .compare("isSent", .equalTo, .bool(false))) == [f.m5.id])
            #expect(try messages(store, .compare("isUnread", .equalTo, .bool(true))) == [f.m1.id, f.m4.id, f.m3.id])
            #expect(try messages(store, .compare("parts.mimeType", .contains, .string("text/plain"))).count == 5)
        }
    }

    @Test func positionsCompareInHybridClockOrder() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let a = try remoteMessage(in: c.id, at: 100, logical: 0)
            let b = try remoteMessage(in: c.id, at: 100, logical: 1)
            // A physical time past 2^63 ms still sorts after: the order key keeps unsigned order.
            var z = try remoteMessage(in: c.id, at: 1)
            z.position = MessagePosition(physical: UInt64.max - 1, logical: 0, node: NodeID(UInt64.max))
            try store.apply([
                .conversation(c), .message(z, receivedAt: received), .message(b, receivedAt: received),
                .message(a, receivedAt: received),
            ])
            #expect(
                try messages(store, .compare("position", .greaterThan, .position(position(100, 0)))) == [b.id, z.id])
            #expect(
                try messages(store, .compare("position", .lessThanOrEqualTo, .position(position(100, 1)))) == [
                    a.id, b.id,
                ])
            #expect(try messages(store, .compare("position", .equalTo, .position(position(100, 1)))) == [b.id])
            #expect(
                try messages(store, .compare("position", .notEqualTo, .position(position(100, 1)))) == [a.id, z.id])
            #expect(
                try messages(
                    store, .compare("position", .in, .list([.position(position(100, 0)), .position(z.position!)]))) == [
                        a.id, z.id,
                    ])
            #expect(
                try messages(store, .compare("position", .notIn, .list([.position(position(100, 0))]))) == [b.id, z.id])
            #expect(
                try messages(
                    store, .compare("position", .greaterThan, .position(.zero)),
                    sort: [QuerySortDescriptor("position", ascending: false)]) == [z.id, b.id, a.id])
        }
    }

    @Test func conversationPropertiesParticipantsAndMetadata() async throws {
        try await withStore { store in
            let f = try QueryFixture(store)
            #expect(try conversations(store, .compare("participants", .contains, .user(carol))) == [f.c2.id, f.c3.id])
            #expect(try conversations(store, .compare("participants", .equalTo, .users([alice, bob]))) == [f.c1.id])
            #expect(
                try conversations(store, .compare("participants", .notEqualTo, .users([alice, bob]))) == [
                    f.c2.id, f.c3.id,
                ])
            #expect(try conversations(store, .compare("metadata.title", .like, .string("%LUNCH%"))) == [f.c1.id])
            #expect(try conversations(store, .compare("metadata.title", .equalTo, .string("Dinner"))) == [f.c2.id])
            #expect(
                try conversations(store, .compare("metadata.title", .notEqualTo, .string("Dinner"))) == [
                    f.c1.id, f.c3.id,
                ])
            #expect(try conversations(store, .compare("metadata.title", .equalTo, .null)) == [f.c3.id])
            #expect(try conversations(store, .compare("metadata.style.color", .equalTo, .string("red"))) == [f.c2.id])
            #expect(try conversations(store, .compare("distinct", .equalTo, .bool(true))) == [f.c1.id, f.c3.id])
            #expect(try conversations(store, .compare("isDistinct", .equalTo, .bool(false))) == [f.c2.id])
            #expect(
                try conversations(store, .compare("createdAt", .greaterThanOrEqualTo, t(2_000))) == [f.c2.id, f.c3.id])
            #expect(
                try conversations(
                    store, .compare("identifier", .in, .list([.conversation(f.c1.id), .conversation(f.c3.id)]))) == [
                        f.c1.id, f.c3.id,
                    ])
            #expect(
                try conversations(store, .compare("unreadMessageCount", .greaterThan, .integer(0))) == [
                    f.c1.id, f.c2.id,
                ])
            #expect(try conversations(store, .compare("totalMessageCount", .equalTo, .integer(3))) == [f.c1.id])
            #expect(try conversations(store, .compare("isSynced", .equalTo, .bool(true))).count == 3)
            #expect(try conversations(store, .compare("lastMessage", .equalTo, .message(f.m3.id))) == [f.c1.id])
            #expect(try conversations(store, .compare("lastMessage.sentAt", .greaterThan, t(160))) == [f.c1.id])
            #expect(try conversations(store, .compare("creator", .equalTo, .user(bob))).count == 3)
        }
    }

    @Test func compoundPredicates() async throws {
        try await withStore { store in
            let f = try QueryFixture(store)
            let inC1 = QueryPredicate.compare("conversation", .equalTo, .conversation(f.c1.id))
            let fromBob = QueryPredicate.compare("sender", .equalTo, .user(bob))
            #expect(try messages(store, inC1 && fromBob) == [f.m1.id, f.m3.id])
            #expect(try messages(store, inC1 && !fromBob) == [f.m2.id])
            #expect(
                try messages(store, .or([fromBob, .compare("sender", .equalTo, .user(carol))])) == [
                    f.m1.id, f.m4.id, f.m3.id,
                ])
            #expect(try messages(store, .not(.or([inC1, .compare("isSent", .equalTo, .bool(false))]))) == [f.m4.id])
            // not over a missing value: "not (sentAt < 200)" includes the unsent message.
            #expect(try messages(store, !.compare("sentAt", .lessThan, t(200))) == [f.m2.id, f.m3.id, f.m5.id])
            #expect(try messages(store, .and([])).count == 5)
            #expect(try messages(store, .or([])).isEmpty)
        }
    }

    @Test func sortLimitOffsetCountAndResultForms() async throws {
        try await withStore { store in
            let f = try QueryFixture(store)
            let bySender = [QuerySortDescriptor("sender"), QuerySortDescriptor("sentAt", ascending: false)]
            // A missing value is the smallest: last when descending (m5 has no sentAt yet).
            #expect(
                try store.identifiers(MQ(sortDescriptors: bySender)) == [f.m2.id, f.m5.id, f.m3.id, f.m1.id, f.m4.id])
            #expect(try store.identifiers(MQ(sortDescriptors: bySender, limit: 2, offset: 1)) == [f.m5.id, f.m3.id])
            #expect(try store.identifiers(MQ(sortDescriptors: bySender, offset: 4)) == [f.m4.id])
            #expect(try store.count(MQ()) == 5)
            #expect(try store.count(MQ(predicate: .compare("isUnread", .equalTo, .bool(true)))) == 3)
            #expect(try store.count(MQ(limit: 2)) == 2)
            let objects = try store.execute(
                MQ(
                    predicate: .compare("conversation", .equalTo, .conversation(f.c1.id)),
                    sortDescriptors: [QuerySortDescriptor("position", ascending: false)]))
            #expect(objects.map(\.message) == [f.m3, f.m2, f.m1])
            let byTitle = try store.execute(CQ(sortDescriptors: [QuerySortDescriptor("metadata.title")]))
            #expect(byTitle.map(\.id) == [f.c3.id, f.c2.id, f.c1.id])  // missing first, then "Dinner" < "Lunch plans"
            let recent = try store.identifiers(
                CQ(sortDescriptors: [QuerySortDescriptor("lastMessage.position", ascending: false)]))
            #expect(recent.first == f.c3.id)  // its last message is unsent, which sorts as newest
        }
    }

    @Test func valuesAreBoundNotSpliced() async throws {
        try await withStore { store in
            let f = try QueryFixture(store)
            let hostile = "x' OR 1=1; DROP TABLE message; --"
            #expect(try messages(store, .compare("sender", .like, .string(hostile))).isEmpty)
            #expect(try conversations(store, .compare("metadata.title", .equalTo, .string(hostile))).isEmpty)
            #expect(try store.count(MQ()) == 5)
            _ = f
        }
    }

    @Test func badQueriesFailWithClearErrors() async throws {
        try await withStore { store in
            _ = try QueryFixture(store)
            func code(_ q: MQ) -> ClientError.Code? {
                do {
                    _ = try store.execute(q)
                    return nil
                } catch { return (error as ClientError).code }
            }
            #expect(code(MQ(predicate: .compare("colour", .equalTo, .string("red")))) == .unknownProperty)
            #expect(code(MQ(predicate: .compare("participants", .contains, .user(bob)))) == .unknownProperty)
            #expect(code(MQ(predicate: .compare("sentAt", .equalTo, .string("yesterday")))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("isSent", .lessThan, .bool(true)))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("sentAt", .like, .string("1%")))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("sentAt", .contains, t(1)))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("sentAt", .in, t(1)))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("sentAt", .in, .list([t(1), .string("x")])))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("isSent", .equalTo, .null))) == .typeMismatch)
            #expect(code(MQ(predicate: .compare("sentAt", .lessThan, .null))) == .typeMismatch)
            #expect(code(MQ(sortDescriptors: [QuerySortDescriptor("nope")])) == .unknownProperty)
            #expect(code(MQ(sortDescriptors: [QuerySortDescriptor("parts.mimeType")])) == .typeMismatch)
            #expect(code(MQ(limit: -1)) == .queryTooComplex)
            #expect(code(MQ(offset: QueryLimits.maxLimit + 1)) == .queryTooComplex)
            var deep = QueryPredicate.compare("isSent", .equalTo, .bool(true))
            for _ in 0..<QueryLimits.maxDepth { deep = .not(deep) }
            #expect(code(MQ(predicate: deep)) == .queryTooComplex)
            let long = QueryValue.list((0...QueryLimits.maxListCount).map { _ in t(1) })
            #expect(code(MQ(predicate: .compare("sentAt", .in, long))) == .queryTooComplex)
            #expect(
                code(
                    MQ(
                        sortDescriptors: Array(
                            repeating: QuerySortDescriptor("sentAt"), count: QueryLimits.maxSortDescriptors + 1)))
                    == .queryTooComplex)
            do {
                _ = try store.execute(CQ(predicate: .compare("metadata.a..b", .equalTo, .string("x"))))
                Issue.record("an empty key path component was accepted")
            } catch let error as ClientError {
                #expect(error.code == .unknownProperty)
            }
            let mismatch = #expect(throws: ClientError.self) {
                try MQ(predicate: .compare("sentAt", .equalTo, .bool(true))).validate()
            }
            #expect(mismatch?.reason.contains("sentAt") == true)
        }
    }
}
