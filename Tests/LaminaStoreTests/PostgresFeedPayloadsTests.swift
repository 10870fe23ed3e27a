import Foundation
import LaminaModel
import Testing

@testable import LaminaStore

/// The `lamina_feed` payloads (`FeedPayloads`): a group's entries travel with their events,
/// within PostgreSQL's payload limit, and what does not fit falls back to a head line (the
/// receiving node reads that feed).
@Suite struct PostgresFeedPayloadsTests {
    private static let alice: UserID = "alice"
    private static let bob: UserID = "bob"

    private static func event(_ byte: UInt8, size: Int, _ entries: [(UserID, UInt64)]) -> AnnouncedFeedEvent {
        AnnouncedFeedEvent(
            encoded: [UInt8](repeating: byte, count: size), entries: entries.map { .init(user: $0.0, seq: $0.1) })
    }

    @Test func entriesRoundTripWithTheirEventsAndNoHeadLineWhenTheyReachTheHeads() throws {
        let events = [
            Self.event(1, size: 200, [(Self.alice, 7), (Self.bob, 3)]),
            Self.event(2, size: 150, [(Self.bob, 4)]),
        ]
        let payloads = FeedPayloads.payloads(
            origin: "node-a", heads: [Self.alice: 7, Self.bob: 4], events: events, now: 1_234)
        #expect(payloads.count == 1)
        let (origin, notification) = try #require(FeedPayloads.decode(payloads[0]))
        #expect(origin == "node-a")
        #expect(notification.sentAtMicroseconds == 1_234)
        #expect(notification.events == [[UInt8](repeating: 1, count: 200), [UInt8](repeating: 2, count: 150)])
        #expect(
            notification.entries == [
                .init(user: Self.alice, seq: 7, event: 0), .init(user: Self.bob, seq: 3, event: 0),
                .init(user: Self.bob, seq: 4, event: 1),
            ])
        #expect(notification.heads.isEmpty)
        #expect(notification.highest.map(\.1) == [7, 4])
    }

    @Test func aHeadBeyondTheEntriesIsNamedToBeRead() throws {
        let payloads = FeedPayloads.payloads(
            origin: "o", heads: [Self.alice: 9, Self.bob: 2], events: [Self.event(1, size: 10, [(Self.alice, 8)])],
            now: 0)
        let payload = try #require(payloads.first)
        let (_, notification) = try #require(FeedPayloads.decode(payload))
        #expect(notification.entries == [.init(user: Self.alice, seq: 8, event: 0)])
        #expect(notification.heads == [.init(user: Self.alice, head: 9), .init(user: Self.bob, head: 2)])
    }

    @Test func everyPayloadStaysUnderTheLimitAndAnEventTooBigBecomesAHeadLine() throws {
        var events: [AnnouncedFeedEvent] = []
        var heads: [UserID: Int64] = [:]
        for n in 1...40 {
            let user = try UserID("user-\(n)")
            events.append(Self.event(UInt8(n), size: 600, [(user, UInt64(n))]))
            heads[user] = Int64(n)
        }
        // One event alone larger than a payload.
        events.append(Self.event(99, size: 7_000, [(Self.alice, 5)]))
        heads[Self.alice] = 5
        let payloads = FeedPayloads.payloads(origin: "o", heads: heads, events: events, now: 0, maxEntryPayloads: 100)
        #expect(payloads.count > 1)
        #expect(payloads.allSatisfy { $0.utf8.count <= NotificationChannel.maxPayloadBytes })
        let decoded = try payloads.map { try #require(FeedPayloads.decode($0)).notification }
        let entries = decoded.flatMap { n in n.entries.map { ($0.user, $0.seq, n.events[$0.event].first) } }
        #expect(entries.count == 40)
        #expect(entries.allSatisfy { UInt64($0.2 ?? 0) == $0.1 }, "each entry names its own event")
        #expect(decoded.flatMap(\.heads) == [.init(user: Self.alice, head: 5)])
    }

    @Test func pastTheBudgetOfEntryPayloadsTheRestAreHeadLines() throws {
        var events: [AnnouncedFeedEvent] = []
        var heads: [UserID: Int64] = [:]
        for n in 1...40 {
            let user = try UserID("user-\(n)")
            events.append(Self.event(1, size: 600, [(user, 1)]))
            heads[user] = 1
        }
        let payloads = FeedPayloads.payloads(origin: "o", heads: heads, events: events, now: 0, maxEntryPayloads: 2)
        let decoded = try payloads.map { try #require(FeedPayloads.decode($0)).notification }
        #expect(decoded.filter { !$0.events.isEmpty }.count == 2)
        let delivered = Set(decoded.flatMap(\.entries).map(\.user))
        let read = Set(decoded.flatMap(\.heads).map(\.user))
        #expect(!delivered.isEmpty && !read.isEmpty)
        #expect(delivered.isDisjoint(with: read))
        #expect(delivered.union(read) == Set(heads.keys), "every feed is delivered or read")
    }

    @Test func theHeadsOnlyFormatOfEarlierNodesStillDecodesAndBadLinesAreSkipped() throws {
        let (origin, notification) = try #require(FeedPayloads.decode("old\n12 alice\n+3 5 bob\nnonsense\n=%%%"))
        #expect(origin == "old")
        #expect(notification.entries.isEmpty)
        // An entry naming an event the payload lacks is read up to its seq instead.
        #expect(notification.heads == [.init(user: Self.alice, head: 12), .init(user: Self.bob, head: 3)])
    }
}
