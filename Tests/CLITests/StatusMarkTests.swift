import LaminaCLI
import LaminaModel
import Testing

@Suite struct StatusMarkTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    static func message(sent: Bool, _ statuses: [UserID: RecipientStatus]) throws -> Message {
        Message(
            conversationID: .random(), sender: alice, parts: [try MessagePart(text: "hi")],
            position: sent ? HLCTimestamp(physical: 1, logical: 0, node: NodeID(1)) : nil,
            recipientStatus: statuses)
    }

    @Test func aMessageTheNodeHasNotAcceptedIsQueuedWhateverItsStatuses() throws {
        let m = try Self.message(sent: false, [Self.alice: .read, Self.bob: .delivered])
        #expect(StatusMark(message: m, participants: [Self.alice, Self.bob]) == .queued)
        #expect(StatusMark.queued.description == "· queued")
    }

    @Test func theMarkIsTheLeastAdvancedOtherParticipant() throws {
        let all: Set<UserID> = [Self.alice, Self.bob, Self.carol]
        let m1 = try Self.message(sent: true, [Self.alice: .read, Self.bob: .read, Self.carol: .delivered])
        #expect(StatusMark(message: m1, participants: all) == .delivered)
        let m2 = try Self.message(sent: true, [Self.alice: .read, Self.bob: .read, Self.carol: .read])
        #expect(StatusMark(message: m2, participants: all) == .read)
        let m3 = try Self.message(sent: true, [Self.alice: .read, Self.bob: .pending])
        #expect(StatusMark(message: m3, participants: all) == .sent)  // carol unknown counts as sent
        #expect(StatusMark(message: m3, participants: [Self.alice]) == .sent)
    }

    @Test func theTrackerReportsSentThenEachRecipientsHighestNewMark() throws {
        var tracker = StatusTracker()
        var m = try Self.message(sent: false, [Self.alice: .read, Self.bob: .pending, Self.carol: .pending])
        tracker.track(m)
        #expect(tracker.updates(for: m).isEmpty)

        m.position = HLCTimestamp(physical: 5, logical: 0, node: NodeID(1))
        #expect(tracker.updates(for: m).map(\.description) == ["✓ sent"])

        m.recipientStatus[Self.bob] = .delivered
        m.recipientStatus[Self.carol] = .read  // delivered and read in one batch: read only
        #expect(tracker.updates(for: m).map(\.description) == ["✓✓ delivered to bob", "✓✓ read by carol"])

        m.recipientStatus[Self.bob] = .read
        #expect(tracker.updates(for: m).map(\.description) == ["✓✓ read by bob"])
        #expect(tracker.updates(for: m).isEmpty)  // nothing new
    }

    @Test func untrackedMessagesReportNothingAndTheOldestAreForgottenPastCapacity() throws {
        var tracker = StatusTracker(capacity: 2)
        let a = try Self.message(sent: false, [:])
        let b = try Self.message(sent: false, [:])
        let c = try Self.message(sent: false, [:])
        tracker.track(a)
        tracker.track(b)
        tracker.track(c)
        #expect(!tracker.isTracked(a.id))
        #expect(tracker.isTracked(b.id) && tracker.isTracked(c.id))
        var sentA = a
        sentA.position = HLCTimestamp(physical: 1, logical: 0, node: NodeID(1))
        #expect(tracker.updates(for: sentA).isEmpty)
    }
}
