import Foundation
import LaminaModel
import LaminaStore
import Testing

@testable import LaminaNode

/// The Layer 3.0 events that came with receipts, parts and identities, and the updates with
/// their `changes`: each row's facts read back to the same event, and it renders as the
/// payload Protocol/WEBHOOKS.md shows.
@Suite struct WebhookEventFactsTests {
    static let base = "https://node.example:7443/apps/app1"
    static let c = "11111111-1111-4111-8111-111111111111"
    static let m = "22222222-2222-4222-8222-222222222222"
    static let at = Timestamp(millisecondsSince1970: 1_764_143_403_123)
    static let eventID = UUID(uuidString: "55555555-5555-4555-8555-555555555555")!
    static let alice =
        #"{"avatar_url":null,"display_name":"alice","id":"layer:///identities/alice","url":"\#(base)/users/alice/identity","user_id":"alice"}"#
    static let position = HLCTimestamp(physical: 1_764_143_403_123, logical: 2, node: NodeID(7))

    static func event(_ type: WebhookEventType, actor: UserID?, _ subject: WebhookEvent.Subject) -> WebhookEvent {
        WebhookEvent(type: type, id: eventID, createdAt: at, actor: actor, base: base, subject: subject)
    }

    static func rendered(_ event: WebhookEvent, as name: String) throws -> String {
        let read = try WebhookEvent(facts: try event.facts())
        #expect(read == event)
        return String(decoding: try read.json(config: nil, typeName: name), as: UTF8.self)
    }

    static func header(_ name: String) -> String {
        #""event":{"created_at":"2025-11-26T07:50:03.123Z","id":"55555555-5555-4555-8555-555555555555","type":"\#(name)"}"#
    }

    static var conversationRef: String {
        #"{"id":"layer:///conversations/\#(c)","url":"\#(base)/conversations/\#(c)"}"#
    }

    static var messageRef: String {
        #"{"conversation":\#(conversationRef),"id":"layer:///messages/\#(m)","url":"\#(base)/conversations/\#(c)/messages/\#(m)"}"#
    }

    static func message(parts: [MessagePart]) -> Message {
        Message(
            id: MessageID(uuid: UUID(uuidString: m)!), conversationID: ConversationID(uuid: UUID(uuidString: c)!),
            sender: "alice", parts: parts, sentAt: at, position: position, push: nil,
            recipientStatus: ["alice": .read, "bob": .sent])
    }

    @Test func aReceiptCarriesItsTypePositionConversationAndMessage() throws {
        let receipt = WebhookReceipt(
            status: .read, conversation: ConversationID(uuid: UUID(uuidString: Self.c)!), upTo: Self.position,
            message: MessageID(uuid: UUID(uuidString: Self.m)!))
        let json = try Self.rendered(
            Self.event(.receiptCreated, actor: "alice", .receipt(receipt)), as: "Receipt.created")
        #expect(
            json
                == #"{"actor":\#(Self.alice),\#(Self.header("Receipt.created")),"receipt":{"conversation":\#(Self.conversationRef),"message":\#(Self.messageRef),"position":115614902067068930,"type":"read"}}"#
        )
        // A range receipt (delivery up to a position) names no message.
        let range = WebhookReceipt(
            status: .delivered, conversation: ConversationID(uuid: UUID(uuidString: Self.c)!), upTo: Self.position,
            message: nil)
        let ranged = try Self.rendered(
            Self.event(.receiptCreated, actor: "bob", .receipt(range)), as: "Receipt.created")
        #expect(
            ranged.contains(
                #""receipt":{"conversation":\#(Self.conversationRef),"position":115614902067068930,"type":"delivery"}"#)
        )
    }

    @Test func aPartEventCarriesThePartAndItsMessage() throws {
        let part = try MessagePart(id: UUID(uuidString: "33333333-3333-4333-8333-333333333333")!, text: "edited")
        for type in [WebhookEventType.messagePartCreated, .messagePartUpdated, .messagePartDeleted] {
            let json = try Self.rendered(
                Self.event(type, actor: "alice", .part(Self.message(parts: [part]))), as: type.rawValue)
            #expect(
                json
                    == #"{"actor":\#(Self.alice),\#(Self.header(type.rawValue)),"message":\#(Self.messageRef),"message_part":{"body":"edited","id":"layer:///messages/\#(Self.m)/parts/33333333-3333-4333-8333-333333333333","mime_type":"text/plain"}}"#
            )
        }
    }

    @Test func anIdentityEventCarriesTheIdentityWithoutAnActor() throws {
        let identity = WebhookIdentity(
            user: "carol",
            identity: StoredIdentity(
                values: ["display_name": "Carol", "first_name": "Carol"], metadata: ["team": "blue"]))
        let json = try Self.rendered(
            Self.event(.identityDeleted, actor: nil, .identity(identity)), as: "Identity.deleted")
        #expect(
            json
                == #"{\#(Self.header("Identity.deleted")),"identity":{"avatar_url":null,"display_name":"Carol","first_name":"Carol","id":"layer:///identities/carol","metadata":{"team":"blue"},"url":"\#(Self.base)/users/carol/identity","user_id":"carol"}}"#
        )
    }

    @Test func anUpdateCarriesItsChangesOldAndNew() throws {
        let conversation = try Conversation(
            id: ConversationID(uuid: UUID(uuidString: Self.c)!), creator: "alice",
            participants: ["alice", "bob", "carol"],
            options: ConversationOptions(), createdAt: Self.at)
        let metadata = try #require(
            WebhookConversationChange.metadata(try MetadataKeyPath(parsing: "title"), nil, .string("Hooks")))
        let participants = try #require(
            WebhookConversationChange.participants(["alice", "bob"], ["alice", "bob", "carol"]))
        #expect(WebhookConversationChange.participants(["alice"], ["alice"]) == nil)
        #expect(
            WebhookConversationChange.metadata(try MetadataKeyPath(parsing: "a"), .string("x"), .string("x")) == nil)
        let json = try Self.rendered(
            Self.event(
                .conversationUpdated, actor: "alice", .conversationUpdate(conversation, [metadata, participants])),
            as: "Conversation.updated")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let changes = try #require(object["changes"] as? [[String: Any]])
        #expect(changes.count == 2)
        #expect(changes[0]["property"] as? String == "metadata.title")
        #expect(changes[0]["old_value"] is NSNull)
        #expect(changes[0]["new_value"] as? String == "Hooks")
        #expect(changes[1]["property"] as? String == "participants")
        #expect(
            (changes[1]["old_value"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
                == ["layer:///identities/alice", "layer:///identities/bob"])
        #expect(
            (changes[1]["new_value"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String }
                == ["alice", "bob", "carol"])
        #expect((object["conversation"] as? [String: Any])?["id"] as? String == "layer:///conversations/\(Self.c)")
    }

    @Test func deletionsCarryTheObjectAsItWas() throws {
        let part = try MessagePart(id: UUID(uuidString: "33333333-3333-4333-8333-333333333333")!, text: "gone")
        let json = try Self.rendered(
            Self.event(.messageDeleted, actor: "alice", .message(Self.message(parts: [part]))), as: "Message.deleted")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let message = try #require(object["message"] as? [String: Any])
        #expect((message["parts"] as? [[String: Any]])?.first?["body"] as? String == "gone")
        #expect((message["sender"] as? [String: Any])?["user_id"] as? String == "alice")
        #expect(message["position"] as? Int64 == 115_614_902_067_068_930)
    }
}
