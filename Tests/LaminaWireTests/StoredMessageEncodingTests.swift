import Foundation
import LaminaModel
import NIOCore
import Testing

@testable import LaminaWire

/// A feed read sends `message-created` encoded straight from the stored columns
/// (`StoredMessageEncoding`): the body copied, the statuses written in order. Those bytes must
/// be exactly what the same message encodes to, and decode back to it.
@Suite struct StoredMessageEncodingTests {
    static let statuses: [UserID: RecipientStatus] = [
        "alice": .read, "al": .sent, "bob": .delivered, "carol": .invalid, "dave": .pending, "zed-9": .sent,
        "ünï": .delivered,
    ]

    /// Messages of every shape a store holds: inline text, a content reference, push and
    /// mentions, a reply (kind 21), a single status.
    static func messages() throws -> [Message] {
        let conversation = ConversationID.random()
        let position = HLCTimestamp(physical: 1_700_000_000_000, logical: 3, node: NodeID(7))
        let sentAt = Timestamp(millisecondsSince1970: 1_700_000_000_123)
        let reference = MessagePart(
            mimeType: "image/png",
            content: .external(ContentReference(id: .random(), size: 3_000_000, sha256: Array(repeating: 7, count: 32)))
        )
        return [
            Message(
                conversationID: conversation, sender: "alice", parts: [try MessagePart(text: "hello")], sentAt: sentAt,
                position: position, recipientStatus: statuses),
            Message(
                conversationID: conversation, sender: "bob",
                parts: [try MessagePart(text: String(repeating: "ü", count: 900)), reference], sentAt: sentAt,
                position: position, push: PushConfiguration(alert: "hi", sound: "ding"), recipientStatus: statuses,
                mentions: ["carol", "ünï"]),
            Message(
                conversationID: conversation, sender: "carol", parts: [try MessagePart(text: "a reply")],
                sentAt: sentAt, position: position, recipientStatus: statuses, replyTo: .random(), mentions: ["al"]),
            Message(
                conversationID: conversation, sender: "zed-9", parts: [try MessagePart(text: "alone")], sentAt: sentAt,
                position: position, recipientStatus: ["zed-9": .read]),
        ]
    }

    static func stored(_ m: Message, statuses: [(user: UserID, status: RecipientStatus)]? = nil) throws
        -> StoredMessageEncoding
    {
        try StoredMessageEncoding(
            id: m.id, conversationID: m.conversationID, sender: m.sender, sentAt: m.sentAt!, position: m.position!,
            body: MessageBodyCoding.encode(parts: m.parts, push: m.push, mentions: m.mentions, replyTo: m.replyTo),
            statuses: statuses ?? m.recipientStatus.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    static func bytes(_ frame: Frame) throws -> [UInt8] { Array(try frame.encoded().readableBytesView) }

    @Test func theStoredEncodingIsTheMessagesEncoding() throws {
        let messages = try Self.messages()
        var stored: [Change] = []
        var reference: [Change] = []
        for (i, message) in messages.enumerated() {
            let change = Change(seq: UInt64(i + 1), shared: SharedChangeEvent(try Self.stored(message)))
            let expected = Change(seq: UInt64(i + 1), event: .messageCreated(message))
            #expect(try Self.bytes(.change(change)) == Self.bytes(.change(expected)), "message \(i)")
            #expect(change.kind == expected.kind)
            #expect(change.kind == (message.replyTo == nil ? 6 : 21))
            #expect(change.event == .messageCreated(message))
            #expect(change.encodedEventSize == (try Self.stored(message)).estimatedSize)
            stored.append(change)
            reference.append(expected)
        }
        let batch = try Frame.changeBatch(ChangeBatch(changes: stored)).encoded()
        #expect(Array(batch.readableBytesView) == (try Self.bytes(.changeBatch(ChangeBatch(changes: reference)))))
        #expect(try Frame.decode(exactly: batch) == .changeBatch(ChangeBatch(changes: reference)))
    }

    @Test func statusesOutOfOrderAreRefused() throws {
        let message = try Self.messages()[0]
        let descending = message.recipientStatus.sorted { $0.key > $1.key }.map { (user: $0.key, status: $0.value) }
        #expect(throws: WireError.self) { try Self.stored(message, statuses: descending) }
        let twice = [(user: UserID("bob"), status: RecipientStatus.sent), (user: "bob", status: .read)]
        #expect(throws: WireError.self) { try Self.stored(message, statuses: twice) }
    }

    @Test func aBodyThatDoesNotDecodeIsRefused() throws {
        let m = try Self.messages()[0]
        let body = try MessageBodyCoding.encode(parts: m.parts, push: nil)
        for bad in [[], body + [9], body + [1, 2, 3], Array(body.dropLast())] {
            #expect(throws: WireError.self) {
                try StoredMessageEncoding(
                    id: m.id, conversationID: m.conversationID, sender: m.sender, sentAt: m.sentAt!,
                    position: m.position!, body: bad, statuses: [])
            }
        }
    }
}
