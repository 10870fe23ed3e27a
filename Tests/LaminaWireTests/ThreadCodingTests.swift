import Foundation
import LaminaModel
import LaminaWire
import NIOCore
import Testing

/// Replies on the wire (SPEC §6.4 kind 21, §5.1 bit 15): one encoding per message, and what a
/// session or peer without the feature is sent is exactly kind 6 of the plain message.
@Suite struct ThreadCodingTests {
    static let plain = Message(
        id: MessageID(uuid: UUID()), conversationID: ConversationID(uuid: UUID()), sender: "bob",
        parts: [try! MessagePart(text: "yes")], sentAt: Timestamp(millisecondsSince1970: 1_000),
        position: HLCTimestamp(physical: 1_000, logical: 0, node: NodeID(1)), recipientStatus: ["alice": .sent])

    static func bytes(_ event: ChangeEvent, seq: UInt64 = 3) throws -> [UInt8] {
        Support.bytes(try Frame.change(Change(seq: seq, event: event)).encoded())
    }

    @Test func aReplyIsKind21AndWithoutTheFeatureTheVeryBytesOfKind6() throws {
        var reply = Self.plain
        reply.replyTo = MessageID(uuid: UUID())
        let event = ChangeEvent.messageCreated(reply)
        #expect(event.kind == 21)
        #expect(ChangeEvent.messageCreated(Self.plain).kind == 6)
        let encoded = try Self.bytes(event)
        #expect(try Frame.decode(exactly: ByteBuffer(bytes: encoded)) == .change(Change(seq: 3, event: event)))
        // Stripped for an old session: the bytes it got before replies existed.
        #expect(try Self.bytes(event.withoutThreadFields) == Self.bytes(.messageCreated(Self.plain)))
        #expect(Change(seq: 3, event: event).withoutThreadFields.kind == 6)
        let op = ReplicatedOperation(
            origin: NodeID(1), counter: 1, hlc: HLCTimestamp(physical: 1, logical: 0, node: NodeID(1)), event: event)
        #expect(op.withoutThreadFields.payload == .change(.messageCreated(Self.plain)))
    }

    @Test func aRootCarriesItsSummaryAndAReplyNeverIsARoot() throws {
        var root = Self.plain
        root.thread = MessageThread(
            replyCount: 300, lastReply: MessageID(uuid: UUID()),
            lastReplyAt: HLCTimestamp(physical: 2_000, logical: 1, node: NodeID(2)))
        let encoded = try Self.bytes(.messageCreated(root), seq: 0)
        #expect(
            try Frame.decode(exactly: ByteBuffer(bytes: encoded))
                == .change(Change(seq: 0, event: .messageCreated(root))))
        var both = root
        both.replyTo = MessageID(uuid: UUID())
        #expect(throws: WireError.self) { try Self.bytes(.messageCreated(both)) }
        var none = root
        none.thread?.replyCount = 0
        #expect(throws: WireError.self) { try Self.bytes(.messageCreated(none)) }
    }

    @Test func aStoredBodyKeepsTheRootAndOldBodiesStillDecode() throws {
        let parts = [try MessagePart(text: "body")]
        let root = MessageID(uuid: UUID())
        let old = try MessageBodyCoding.encode(parts: parts, push: nil)
        #expect(try MessageBodyCoding.decode(old).replyTo == nil)
        let withRoot = try MessageBodyCoding.encode(parts: parts, push: nil, replyTo: root)
        #expect(withRoot.count == old.count + 17)
        let decoded = try MessageBodyCoding.decode(withRoot)
        #expect(decoded.replyTo == root && decoded.parts == parts)
        var bad = withRoot
        bad[old.count] = 2
        #expect(throws: WireError.self) { try MessageBodyCoding.decode(bad) }
    }
}
