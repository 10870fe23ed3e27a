import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire
import NIOCore
import Testing

@testable import LaminaNode

/// A new message is encoded once for all its feeds (`FeedCoding.messageCreated`), also when
/// each viewer sees only their own status (both receipt switches off): then every status is
/// `invalid` in the shared bytes and each feed's CHANGE gets its viewer's status byte put in.
/// Each viewer's CHANGE must be exactly the one the message as that viewer is shown it encodes to.
@Suite struct SharedMessageEncodingTests {
    static let sender: UserID = "alice"
    /// Statuses of every kind, users whose ids sort around the sender's and differ in length.
    static let statuses: [UserID: RecipientStatus] = [
        "alice": .read, "al": .sent, "bob": .delivered, "carol": .read, "dave": .pending, "zed-9": .sent,
        "ünï": .delivered,
    ]

    static func message() throws -> Message {
        Message(
            conversationID: .random(), sender: sender, parts: [try MessagePart(text: "hello, everyone")],
            sentAt: Timestamp(millisecondsSince1970: 1_700_000_000_000),
            position: HLCTimestamp(physical: 1_700_000_000_000, logical: 3, node: NodeID(7)),
            push: PushConfiguration(alert: "hi"), recipientStatus: statuses)
    }

    /// What `viewer` is shown with the switches (SPEC §6.2): statuses as they are when one
    /// switch is on (the client applies the switches), else only the viewer's own.
    static func shown(_ message: Message, to viewer: UserID, delivery: Bool, read: Bool) -> Message {
        guard !delivery, !read else { return message }
        var out = message
        for (user, status) in message.recipientStatus {
            out.recipientStatus[user] = RecipientStatusLattice.reported(
                status, of: user, viewer: viewer, deliveryReceipts: false, readReceipts: false)
        }
        return out
    }

    static func bytes(_ frame: Frame) throws -> [UInt8] { Array(try frame.encoded().readableBytesView) }

    @Test(arguments: [(true, true), (true, false), (false, true), (false, false)])
    func eachViewersChangeIsTheEncodingOfWhatTheViewerIsShown(delivery: Bool, read: Bool) throws {
        let message = try Self.message()
        let shared = try FeedCoding.messageCreated(message, sharesStatuses: delivery || read)
        // Viewers with a status, and one without (not in the map: nothing is put in).
        let viewers = Array(Self.statuses.keys) + ["nobody"]
        // Twice over, so a viewer's status put into one CHANGE never shows in the next one's.
        for (i, viewer) in (viewers + viewers.reversed()).enumerated() {
            let seq = UInt64(i + 1)
            let expected = Self.shown(message, to: viewer, delivery: delivery, read: read)
            let change = FeedChange(user: viewer, seq: seq, shared: shared).change
            let reference = Change(seq: seq, event: .messageCreated(expected))
            #expect(try Self.bytes(.change(change)) == Self.bytes(.change(reference)), "viewer \(viewer)")
            #expect(change.event == .messageCreated(expected), "viewer \(viewer)")
            #expect(change.kind == ChangeEvent.messageCreated(expected).kind)
            guard case .change(let decoded) = try Frame.decode(exactly: try Frame.change(change).encoded()) else {
                Issue.record("not a CHANGE")
                continue
            }
            #expect(decoded == reference, "viewer \(viewer)")
            // In a batch, between changes of other events, too.
            let batch = ChangeBatch(changes: [
                Change(
                    seq: seq,
                    event: .typing(TypingChanged(conversationID: message.conversationID, user: viewer, state: .started))
                ),
                change, FeedChange(user: "bob", seq: seq + 1, shared: shared).change,
            ])
            let expectedBatch = ChangeBatch(changes: [
                batch.changes[0], reference,
                Change(
                    seq: seq + 1, event: .messageCreated(Self.shown(message, to: "bob", delivery: delivery, read: read))
                ),
            ])
            #expect(try Self.bytes(.changeBatch(batch)) == Self.bytes(.changeBatch(expectedBatch)))
        }
        // The feed payload (seq 0) of a viewer's change is the viewer's own, too.
        let bob = FeedChange(user: "bob", seq: 9, shared: shared).change
        let payload = try FeedCoding.encode(bob)
        #expect(
            try FeedCoding.decodeEvent(payload)
                == .messageCreated(Self.shown(message, to: "bob", delivery: delivery, read: read)))
    }

    @Test func bothSwitchesOffEncodesTheMessageOnceWithEveryStatusInvalid() throws {
        let message = try Self.message()
        let shared = try FeedCoding.messageCreated(message, sharesStatuses: false)
        guard case .messageCreated(let common) = shared.event else {
            Issue.record("not a message-created event")
            return
        }
        #expect(common.recipientStatus.keys == message.recipientStatus.keys)
        #expect(common.recipientStatus.values.allSatisfy { $0 == .invalid })
        // A change's event set anew is encoded as it is (the viewer's byte is not put in).
        var change = FeedChange(user: "bob", seq: 1, shared: shared).change
        change.event = .messageCreated(message)
        #expect(try Self.bytes(.change(change)) == Self.bytes(.change(Change(seq: 1, event: .messageCreated(message)))))
    }
}
