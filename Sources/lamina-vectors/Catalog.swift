import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

// The frames behind Protocol/vectors/valid. Fixed values only: the output is reproducible.

/// A UUID whose last group is `n` (e.g. u(1) = 00000000-0000-4000-8000-000000000001).
func u(_ n: Int) -> UUID {
    let tail = String(n, radix: 16)
    return UUID(uuidString: "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - tail.count) + tail)!
}

func user(_ s: String) -> UserID { try! UserID(s) }
func hlc(_ p: UInt64, _ l: UInt32, _ n: UInt64) -> HLCTimestamp {
    HLCTimestamp(physical: p, logical: l, node: NodeID(n))
}
func text(_ id: Int, _ s: String) -> MessagePart {
    MessagePart(id: u(id), mimeType: .textPlain, content: .inline(Array(s.utf8)))
}

let conversation1 = ConversationID(uuid: u(0xC1))
let message1 = MessageID(uuid: u(0xA1))
let t0 = Timestamp(millisecondsSince1970: 1_767_225_600_000)  // 2026-01-01T00:00:00Z
let hundredBytes =
    "The quick brown fox jumps over the lazy dog while the relay node keeps every message in order. ok!!!"

let sampleConversation = Conversation(
    id: conversation1, participants: [user("alice"), user("bob"), user("carol")], isDistinct: true,
    metadata: ["title": .string("Lunch"), "style": .dictionary(["color": .string("#ff8800")])],
    deliveryReceiptsEnabled: true, createdAt: t0, creator: user("alice")
)

let sampleMessage = Message(
    id: message1, conversationID: conversation1, sender: user("alice"),
    parts: [text(0xB1, "Hi, how are you?")], sentAt: t0, position: hlc(1_767_225_600_000, 0, 1),
    push: PushConfiguration(alert: "alice: Hi, how are you?", sound: "default"),
    recipientStatus: [user("alice"): .read, user("bob"): .delivered, user("carol"): .sent]
)

let channel1 = ChannelID(uuid: u(0xD1))
let sampleChannel = ChatChannel(id: channel1, name: try! ChannelName("general"), creator: user("alice"), createdAt: t0)
let sampleChannelMessage = ChannelMessage(
    id: MessageID(uuid: u(0xA9)), channelID: channel1, sender: user("bob"), sentAt: t0,
    position: hlc(1_767_225_600_200, 0, 1), logSeq: 1_201, parts: [text(0xB9, "Hi all")])

struct ValidVector {
    var name: String
    var description: String
    var frame: Frame
}

let validVectors: [ValidVector] = [
    .init(
        name: "hello", description: "HELLO offering version 1 with all features.",
        frame: .hello(Hello(minVersion: 1, maxVersion: 1, features: .all, agent: "lamina-swift/0.1"))),
    .init(
        name: "hello-version-range", description: "HELLO offering versions 1 to 3 and an unknown feature bit 63.",
        frame: .hello(Hello(minVersion: 1, maxVersion: 3, features: FeatureSet(rawValue: 1 << 63 | 0x0F), agent: ""))),
    .init(
        name: "welcome", description: "WELCOME choosing version 1.",
        frame: .welcome(
            Welcome(
                version: 1, features: [.changeBatches, .typingIndicators], nodeID: NodeID(0x1234_5678_9ABC_DEF0),
                serverTime: t0, maxFrameSize: 4_194_304, cluster: "eu-1"))),
    .init(
        name: "welcome-long-cluster",
        description:
            "WELCOME naming a cluster of 1,024 bytes, the longest a cluster name may be: a payload of 1,058 bytes, within WELCOME's maximum of 2,048 (SPEC §4.1, §5.1).",
        frame: .welcome(
            Welcome(
                version: 1, features: .supported, nodeID: NodeID(7), serverTime: t0, maxFrameSize: 1_048_576,
                cluster: String(repeating: "c", count: 1_024)))),
    .init(
        name: "nonce-request", description: "NONCE_REQUEST.",
        frame: .nonceRequest(NonceRequest(requestID: u(1)))),
    .init(
        name: "nonce", description: "NONCE answering request 1, valid for 10 minutes.",
        frame: .nonce(
            Nonce(
                requestID: u(1), nonce: "7c5d0f0e3a6b4d0c9f1e2a3b4c5d6e7f",
                expiresAt: Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + 600_000)))),
    .init(
        name: "authenticate", description: "AUTHENTICATE with a (truncated, unsigned-looking) JWT.",
        frame: .authenticate(
            Authenticate(
                requestID: u(2), identityToken: "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJwcm4iOiJhbGljZSJ9.c2ln",
                deviceID: u(0xD1)))),
    .init(
        name: "authenticated", description: "AUTHENTICATED with a display name and no avatar.",
        frame: .authenticated(
            Authenticated(
                requestID: u(2), sessionToken: "st_0123456789abcdef",
                identity: Identity(userID: user("alice"), displayName: "Alice Ö", avatarURL: nil),
                expiresAt: Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + 86_400_000)))),
    .init(
        name: "resume-session", description: "RESUME_SESSION with an earlier session token.",
        frame: .resumeSession(ResumeSession(requestID: u(3), sessionToken: "st_0123456789abcdef", deviceID: u(0xD1)))),
    .init(
        name: "end-session", description: "END_SESSION: revoke this stream's session (signing out).",
        frame: .endSession(EndSession(requestID: u(0x0E)))),
    .init(
        name: "register-push-token-apns",
        description: "REGISTER_PUSH_TOKEN: a 32-byte APNs sandbox token for topic com.example.chat.",
        frame: .registerPushToken(
            RegisterPushToken(
                requestID: u(0x0F),
                token: .apns(
                    token: (0..<32).map { UInt8($0 * 7 & 0xFF) }, topic: "com.example.chat", environment: .sandbox)))),
    .init(
        name: "register-push-token-fcm", description: "REGISTER_PUSH_TOKEN: an FCM registration token.",
        frame: .registerPushToken(
            RegisterPushToken(requestID: u(0x10), token: .fcm(token: "fcm-token:APA91bH3x_example-0123456789")))),
    .init(
        name: "register-push-token-gateway", description: "REGISTER_PUSH_TOKEN: a push gateway token.",
        frame: .registerPushToken(RegisterPushToken(requestID: u(0x11), token: .gateway(token: "device-7f3a")))),
    .init(
        name: "register-push-token-none", description: "REGISTER_PUSH_TOKEN with kind 0: remove the device's token.",
        frame: .registerPushToken(RegisterPushToken(requestID: u(0x12), token: nil))),
    .init(name: "ping", description: "PING.", frame: .ping(Ping(payload: 42))),
    .init(name: "pong", description: "PONG echoing the largest payload.", frame: .pong(Ping(payload: UInt64.max))),
    .init(
        name: "ack-message", description: "ACK of a sent message: position and sent-at.",
        frame: .ack(
            Ack(
                requestID: message1.uuid, conversationID: conversation1, position: hlc(1_767_225_600_000, 3, 1),
                timestamp: t0))),
    .init(
        name: "ack-minimal", description: "ACK with nothing but the request id.",
        frame: .ack(Ack(requestID: u(4)))),
    .init(
        name: "ack-sync", description: "ACK of a SYNC: the backlog was sent up to cursor 1000.",
        frame: .ack(Ack(requestID: u(5), cursor: 1_000))),
    .init(
        name: "error-not-a-participant", description: "ERROR for a command, not fatal.",
        frame: .error(
            ErrorFrame(
                requestID: u(6), code: .notAParticipant, reason: "you are not a participant of this conversation",
                isFatal: false))),
    .init(
        name: "error-existing-distinct",
        description: "ERROR existing-distinct-conversation naming the existing conversation.",
        frame: .error(
            ErrorFrame(
                requestID: u(7), code: .existingDistinctConversation,
                reason: "a distinct conversation with these participants exists with different metadata",
                isFatal: false, conversationID: conversation1))),
    .init(
        name: "error-overloaded", description: "ERROR overloaded with a retry delay, no request id.",
        frame: .error(ErrorFrame(code: .overloaded, reason: "try again", isFatal: false, retryAfterMilliseconds: 2_500))
    ),
    .init(
        name: "error-fatal-malformed", description: "Fatal ERROR after a malformed frame.",
        frame: .error(ErrorFrame(code: .malformed, reason: "a bool byte was 0x02", isFatal: true))),
    .init(
        name: "create-conversation", description: "CREATE_CONVERSATION, distinct, with nested metadata.",
        frame: .createConversation(
            CreateConversation(
                conversationID: conversation1, participants: [user("bob"), user("carol")],
                options: ConversationOptions(
                    isDistinct: true,
                    metadata: ["title": .string("Lunch"), "style": .dictionary(["color": .string("#ff8800")])],
                    deliveryReceiptsEnabled: true)))),
    .init(
        name: "create-conversation-plain", description: "CREATE_CONVERSATION, not distinct, receipts off, no metadata.",
        frame: .createConversation(
            CreateConversation(
                conversationID: ConversationID(uuid: u(0xC2)), participants: [user("bob")],
                options: ConversationOptions(
                    isDistinct: false, metadata: [:], deliveryReceiptsEnabled: false, readReceiptsEnabled: false)))),
    .init(
        name: "create-conversation-delivery-receipts-off",
        description: "CREATE_CONVERSATION with delivery receipts off and read receipts on (receipts byte 02, bit 13).",
        frame: .createConversation(
            CreateConversation(
                conversationID: ConversationID(uuid: u(0xC3)), participants: [user("bob")],
                options: ConversationOptions(
                    isDistinct: false, metadata: [:], deliveryReceiptsEnabled: false, readReceiptsEnabled: true)))),
    .init(
        name: "create-conversation-read-receipts-off",
        description: "CREATE_CONVERSATION with delivery receipts on and read receipts off (receipts byte 03, bit 13).",
        frame: .createConversation(
            CreateConversation(
                conversationID: ConversationID(uuid: u(0xC4)), participants: [user("bob")],
                options: ConversationOptions(
                    isDistinct: false, metadata: [:], deliveryReceiptsEnabled: true, readReceiptsEnabled: false)))),
    .init(
        name: "add-participants", description: "ADD_PARTICIPANTS (set order is byte order: 'Zed' < 'dave').",
        frame: .addParticipants(
            ParticipantsUpdate(requestID: u(8), conversationID: conversation1, users: [user("dave"), user("Zed")]))),
    .init(
        name: "remove-participants", description: "REMOVE_PARTICIPANTS.",
        frame: .removeParticipants(
            ParticipantsUpdate(requestID: u(9), conversationID: conversation1, users: [user("carol")]))),
    .init(
        name: "set-metadata", description: "SET_METADATA of a string at style.color.",
        frame: .setMetadata(
            SetMetadata(
                requestID: u(10), conversationID: conversation1, keyPath: try! MetadataKeyPath(["style", "color"]),
                value: .string("#0088ff")))),
    .init(
        name: "set-metadata-map", description: "SET_METADATA of a map at style.",
        frame: .setMetadata(
            SetMetadata(
                requestID: u(11), conversationID: conversation1, keyPath: try! MetadataKeyPath(["style"]),
                value: .dictionary(["color": .string("#0088ff"), "font": .string("serif")])))),
    .init(
        name: "delete-metadata", description: "DELETE_METADATA of title.",
        frame: .deleteMetadata(
            DeleteMetadata(requestID: u(12), conversationID: conversation1, keyPath: try! MetadataKeyPath(["title"])))),
    .init(
        name: "delete-conversation", description: "DELETE_CONVERSATION for all participants.",
        frame: .deleteConversation(
            DeleteConversation(requestID: u(13), conversationID: conversation1, mode: .allParticipants))),
    .init(
        name: "delete-conversation-below",
        description: "DELETE_CONVERSATION on my devices of the messages below a position.",
        frame: .deleteConversation(
            DeleteConversation(
                requestID: u(14), conversationID: conversation1, mode: .myDevices, below: hlc(1_767_225_600_000, 0, 1)))
    ),
    .init(
        name: "mark-all-read", description: "MARK_ALL_READ up to a position.",
        frame: .markAllRead(
            MarkAllRead(requestID: u(15), conversationID: conversation1, upTo: hlc(1_767_225_700_000, 2, 7)))),
    .init(
        name: "typing-started", description: "TYPING started.",
        frame: .typing(Typing(conversationID: conversation1, state: .started))),
    .init(
        name: "typing-finished", description: "TYPING finished.",
        frame: .typing(Typing(conversationID: conversation1, state: .finished))),
    .init(
        name: "send-message-text",
        description: "SEND_MESSAGE with one 100-byte text/plain part (the benchmark's typical frame).",
        frame: .sendMessage(
            SendMessage(messageID: message1, conversationID: conversation1, parts: [text(0xB1, hundredBytes)]))),
    .init(
        name: "send-message-mentions",
        description: "SEND_MESSAGE that mentions bob, no push (trailer 02, then the user set; SPEC §3.17, bit 17).",
        frame: .sendMessage(
            SendMessage(
                messageID: MessageID(uuid: u(0xA7)), conversationID: conversation1, parts: [text(0xB7, "@bob hi")],
                mentions: [user("bob")]))),
    .init(
        name: "send-message-parts",
        description:
            "SEND_MESSAGE with an inline text part, an inline JSON part and a content reference, and a push configuration.",
        frame: .sendMessage(
            SendMessage(
                messageID: MessageID(uuid: u(0xA2)), conversationID: conversation1,
                parts: [
                    text(0xB2, "Look at this"),
                    MessagePart(
                        id: u(0xB3), mimeType: "application/json",
                        content: .inline(Array(#"{"lat":52.52,"lon":13.40}"#.utf8))),
                    MessagePart(
                        id: u(0xB4), mimeType: "image/png",
                        content: .external(
                            ContentReference(id: ContentID(uuid: u(0xE1)), size: 1_048_576, sha256: Array(0..<32)))),
                ],
                push: PushConfiguration(
                    alert: "alice sent a photo", sound: "chime.caf", title: "Lunch", category: "PHOTO",
                    data: ["thread": "c1", "kind": "photo"])
            ))),
    .init(
        name: "send-message-empty-inline", description: "SEND_MESSAGE with one empty inline part.",
        frame: .sendMessage(
            SendMessage(
                messageID: MessageID(uuid: u(0xA3)), conversationID: conversation1,
                parts: [MessagePart(id: u(0xB5), mimeType: "application/octet-stream", content: .inline([]))]))),
    .init(
        name: "mark-read", description: "MARK_READ of one message.",
        frame: .markRead(MarkRead(requestID: u(16), conversationID: conversation1, messageID: message1))),
    .init(
        name: "delete-message", description: "DELETE_MESSAGE on my devices.",
        frame: .deleteMessage(
            DeleteMessage(requestID: u(17), conversationID: conversation1, messageID: message1, mode: .myDevices))),
    .init(
        name: "delivery-receipt", description: "DELIVERY_RECEIPT up to a position.",
        frame: .deliveryReceipt(
            DeliveryReceipt(requestID: u(18), conversationID: conversation1, upTo: hlc(1_767_225_600_000, 0, 1)))),
    .init(
        name: "update-message-parts",
        description: "UPDATE_MESSAGE_PARTS: the message's parts become two text parts (the first kept, one added).",
        frame: .updateMessageParts(
            UpdateMessageParts(
                requestID: u(0x1A), conversationID: conversation1, messageID: message1,
                parts: [text(0xB1, "hello"), text(0xB6, "an addition")]))),
    .init(
        name: "react-add", description: "REACT: alice adds the reaction \u{1F44D} (4 UTF-8 bytes) to a message.",
        frame: .react(
            React(requestID: u(0x1B), conversationID: conversation1, messageID: message1, key: "\u{1F44D}", op: .add))),
    .init(
        name: "react-remove", description: "REACT: the reaction +1 is removed.",
        frame: .react(
            React(requestID: u(0x1C), conversationID: conversation1, messageID: message1, key: "+1", op: .remove))),
    .init(
        name: "sync-from-start", description: "SYNC from cursor 0.",
        frame: .sync(SyncRequest(requestID: u(19), cursor: 0))),
    .init(
        name: "sync-from-cursor", description: "SYNC from cursor 300 (two-byte varint).",
        frame: .sync(SyncRequest(requestID: u(20), cursor: 300))),
    .init(
        name: "sync-cursor-max",
        description: "SYNC from cursor 2^64 - 1: the only ten-byte varints end in 01 (SPEC §3.3).",
        frame: .sync(SyncRequest(requestID: u(20), cursor: UInt64.max))),
    .init(
        name: "sync-cursor-nine-bytes", description: "SYNC from cursor 2^63 - 1: nine bytes, the last 7f.",
        frame: .sync(SyncRequest(requestID: u(20), cursor: UInt64(Int64.max)))),
    .init(
        name: "fetch-history-complete", description: "FETCH_HISTORY, complete.",
        frame: .fetchHistory(FetchHistory(requestID: u(21), conversationID: conversation1, policy: .complete))),
    .init(
        name: "fetch-history-unread", description: "FETCH_HISTORY, unread only.",
        frame: .fetchHistory(FetchHistory(requestID: u(22), conversationID: conversation1, policy: .unreadOnly))),
    .init(
        name: "fetch-history-last-n", description: "FETCH_HISTORY, last 50 before a position.",
        frame: .fetchHistory(
            FetchHistory(
                requestID: u(23), conversationID: conversation1, policy: .lastN(50),
                before: hlc(1_767_225_600_000, 0, 1)))),
    .init(
        name: "fetch-history-page-after",
        description: "FETCH_HISTORY, complete history a page at a time: the first 500 messages after a position.",
        frame: .fetchHistory(
            FetchHistory(
                requestID: u(24), conversationID: conversation1,
                policy: .pageAfter(hlc(1_767_225_600_000, 2, 1), count: 500)))),
    .init(
        name: "fetch-history-first-page", description: "FETCH_HISTORY, the first page of complete history (no start).",
        frame: .fetchHistory(
            FetchHistory(requestID: u(25), conversationID: conversation1, policy: .pageAfter(nil, count: 10_000)))),
    .init(
        name: "search-messages",
        description: "SEARCH_MESSAGES in every conversation: the first 20 results for \"lunch tom\".",
        frame: .searchMessages(SearchMessages(requestID: u(26), text: "lunch tom", limit: 20))),
    .init(
        name: "search-messages-in-conversation",
        description:
            "SEARCH_MESSAGES in one conversation, the third page of 50 (offset 100), the largest text (256 bytes).",
        frame: .searchMessages(
            SearchMessages(
                requestID: u(27), text: String(repeating: "é", count: 128), conversationID: conversation1, limit: 50,
                offset: 100))),
    .init(
        name: "change-conversation-created", description: "CHANGE: conversation created.",
        frame: .change(Change(seq: 1, event: .conversationCreated(sampleConversation)))),
    .init(
        name: "change-conversation-updated", description: "CHANGE: conversation updated (counts).",
        frame: .change(
            Change(
                seq: 2,
                event: .conversationUpdated(
                    ConversationUpdated(
                        conversationID: conversation1, isDistinct: false, deliveryReceiptsEnabled: true,
                        messageCount: 12, unreadCount: 3, lastMessageID: message1))))),
    .init(
        name: "change-conversation-updated-read-receipts-off",
        description: "CHANGE: conversation updated, delivery receipts on and read receipts off (receipts byte 03).",
        frame: .change(
            Change(
                seq: 2,
                event: .conversationUpdated(
                    ConversationUpdated(
                        conversationID: conversation1, isDistinct: false, deliveryReceiptsEnabled: true,
                        readReceiptsEnabled: false, messageCount: 12, unreadCount: 0, lastMessageID: nil))))),
    .init(
        name: "change-participants-changed", description: "CHANGE: participants changed.",
        frame: .change(
            Change(
                seq: 3,
                event: .participantsChanged(
                    ParticipantsChanged(
                        conversationID: conversation1, added: [user("dave")], removed: [user("carol")],
                        by: user("alice"), at: hlc(1_767_225_600_500, 0, 1)))))),
    .init(
        name: "change-metadata-set", description: "CHANGE: metadata key set.",
        frame: .change(
            Change(
                seq: 4,
                event: .metadataChanged(
                    MetadataChanged(
                        conversationID: conversation1, keyPath: try! MetadataKeyPath(["title"]),
                        value: .string("Dinner"), by: user("bob"), at: hlc(1_767_225_600_600, 1, 2)))))),
    .init(
        name: "change-metadata-deleted", description: "CHANGE: metadata key deleted.",
        frame: .change(
            Change(
                seq: 5,
                event: .metadataChanged(
                    MetadataChanged(
                        conversationID: conversation1, keyPath: try! MetadataKeyPath(["style", "color"]), value: nil,
                        by: user("bob"), at: hlc(1_767_225_600_700, 0, 2)))))),
    .init(
        name: "change-conversation-deleted", description: "CHANGE: conversation deleted for all participants.",
        frame: .change(
            Change(
                seq: 6,
                event: .conversationDeleted(
                    ConversationDeleted(conversationID: conversation1, mode: .allParticipants, by: user("alice")))))),
    .init(
        name: "change-identifier-changed", description: "CHANGE: distinct conversation merged into another.",
        frame: .change(
            Change(
                seq: 7,
                event: .identifierChanged(IdentifierChanged(from: ConversationID(uuid: u(0xC3)), to: conversation1))))),
    .init(
        name: "change-message-created", description: "CHANGE: message created, with statuses.",
        frame: .change(Change(seq: 8, event: .messageCreated(sampleMessage)))),
    .init(
        name: "change-message-created-mentions",
        description: "CHANGE: message created that mentions bob and carol, with a push (trailer 03, SPEC §3.17).",
        frame: .change(
            Change(
                seq: 23,
                event: .messageCreated(
                    Message(
                        id: MessageID(uuid: u(0xA8)), conversationID: conversation1, sender: user("alice"),
                        parts: [text(0xB8, "@bob @carol lunch?")], sentAt: t0, position: hlc(1_767_225_600_100, 0, 1),
                        push: PushConfiguration(alert: "alice mentioned you"),
                        recipientStatus: [user("alice"): .read, user("bob"): .sent, user("carol"): .sent],
                        mentions: [user("bob"), user("carol")]))))),
    .init(
        name: "change-message-status", description: "CHANGE: bob read the message.",
        frame: .change(
            Change(
                seq: 9,
                event: .messageStatusChanged(
                    MessageStatusChanged(
                        conversationID: conversation1, messageID: message1, user: user("bob"), status: .read))))),
    .init(
        name: "change-status-up-to",
        description: "CHANGE: bob's devices hold every message of others up to a position (delivered).",
        frame: .change(
            Change(
                seq: 14,
                event: .statusUpTo(
                    StatusUpTo(
                        conversationID: conversation1, user: user("bob"), status: .delivered,
                        upTo: hlc(1_767_225_600_800, 3, 1)))))),
    .init(
        name: "change-message-deleted", description: "CHANGE: message deleted for all participants.",
        frame: .change(
            Change(
                seq: 10,
                event: .messageDeleted(
                    MessageDeleted(
                        conversationID: conversation1, messageID: message1, mode: .allParticipants, by: user("alice"))))
        )),
    .init(
        name: "change-message-parts-changed",
        description: "CHANGE: the parts of a message were replaced (part updates feature).",
        frame: .change(
            Change(
                seq: 14,
                event: .messagePartsChanged(
                    MessagePartsChanged(
                        conversationID: conversation1, messageID: message1, parts: [text(0xB1, "hello, edited")],
                        by: user("alice"), at: hlc(1_767_225_600_500, 2, 1)))))),
    .init(
        name: "change-reactions-changed",
        description: "CHANGE: bob reacted with +1 (reactions feature): present, at its tag, no removed tags.",
        frame: .change(
            Change(
                seq: 21,
                event: .reactionsChanged(
                    ReactionsChanged(
                        conversationID: conversation1, messageID: message1, user: user("bob"), key: "+1",
                        present: true, at: hlc(1_767_225_600_900, 0, 1)))))),
    .init(
        name: "change-reactions-removed",
        description: "CHANGE: bob's +1 went away: the remove took away two tags (made on nodes 1 and 2).",
        frame: .change(
            Change(
                seq: 22,
                event: .reactionsChanged(
                    ReactionsChanged(
                        conversationID: conversation1, messageID: message1, user: user("bob"), key: "+1",
                        present: false, at: hlc(1_767_225_601_000, 0, 1),
                        removedTags: [hlc(1_767_225_600_900, 0, 1), hlc(1_767_225_600_950, 1, 2)]))))),
    .init(
        name: "replicate-reactions",
        description:
            "REPLICATE of kind 20: an add on node 2 (its tag is the operation's at) and a remove on node 1 naming that tag.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(2), counter: 14, hlc: hlc(1_767_225_600_950, 1, 2),
                    event: .reactionsChanged(
                        ReactionsChanged(
                            conversationID: conversation1, messageID: message1, user: user("bob"), key: "+1",
                            present: true, at: hlc(1_767_225_600_950, 1, 2)))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 140, hlc: hlc(1_767_225_601_000, 0, 1),
                    event: .reactionsChanged(
                        ReactionsChanged(
                            conversationID: conversation1, messageID: message1, user: user("bob"), key: "+1",
                            present: false, at: hlc(1_767_225_601_000, 0, 1),
                            removedTags: [hlc(1_767_225_600_950, 1, 2)]))),
            ]))),
    .init(
        name: "change-identity-changed", description: "CHANGE: bob's identity was set (identities feature).",
        frame: .change(
            Change(
                seq: 15,
                event: .identityChanged(
                    IdentityChange(
                        user: user("bob"),
                        identity: .init(
                            values: ["avatar_url": "https://example.com/bob.png", "display_name": "Bob B."],
                            metadata: ["team": "blue"])))))),
    .init(
        name: "change-identity-deleted", description: "CHANGE: bob's identity was deleted (identities feature).",
        frame: .change(Change(seq: 16, event: .identityChanged(IdentityChange(user: user("bob"), identity: nil))))),
    .init(
        name: "change-block-list-changed", description: "CHANGE: the feed's user blocked carol (block lists feature).",
        frame: .change(Change(seq: 17, event: .blockListChanged(BlockListChanged(user: user("carol"), blocking: true))))
    ),
    .init(
        name: "block-user", description: "BLOCK_USER: block carol.",
        frame: .blockUser(BlockUser(requestID: u(0x13), user: user("carol"), blocking: true))),
    .init(
        name: "unblock-user", description: "BLOCK_USER: unblock carol.",
        frame: .blockUser(BlockUser(requestID: u(0x14), user: user("carol"), blocking: false))),
    .init(
        name: "follow-user", description: "FOLLOW_USER: follow carol (following feature).",
        frame: .followUser(FollowUser(requestID: u(0x17), user: user("carol"), following: true))),
    .init(
        name: "unfollow-user", description: "FOLLOW_USER: unfollow carol.",
        frame: .followUser(FollowUser(requestID: u(0x18), user: user("carol"), following: false))),
    .init(
        name: "change-follow-changed", description: "CHANGE: the feed's user now follows carol (following feature).",
        frame: .change(Change(seq: 18, event: .followChanged(FollowChanged(user: user("carol"), following: true))))),
    .init(
        name: "set-notification-level",
        description: "SET_NOTIFICATION_LEVEL: only mentions notify the user, with no end (SPEC §6.10, bit 18).",
        frame: .setNotificationLevel(
            SetNotificationLevel(requestID: u(0x38), conversationID: conversation1, level: .mentions))),
    .init(
        name: "set-notification-level-until",
        description: "SET_NOTIFICATION_LEVEL: nothing notifies the user until 2026-01-01T01:00:00Z.",
        frame: .setNotificationLevel(
            SetNotificationLevel(
                requestID: u(0x39), conversationID: conversation1, level: .none,
                until: Timestamp(millisecondsSince1970: 1_767_229_200_000)))),
    .init(
        name: "change-notification-level-changed",
        description: "CHANGE: the feed's user muted conversation 1 for an hour (notification levels feature).",
        frame: .change(
            Change(
                seq: 22,
                event: .notificationLevelChanged(
                    NotificationLevelChanged(
                        conversationID: conversation1, level: .none,
                        until: Timestamp(millisecondsSince1970: 1_767_229_200_000)))))),
    .init(
        name: "set-presence", description: "SET_PRESENCE: the user is away (presence feature).",
        frame: .setPresence(SetPresence(requestID: u(0x15), status: .away))),
    .init(
        name: "set-presence-invisible", description: "SET_PRESENCE: the user goes invisible (others see offline).",
        frame: .setPresence(SetPresence(requestID: u(0x16), status: .invisible))),
    .init(
        name: "change-presence-available",
        description: "CHANGE: bob, whom the user follows, is available (seq 0, no lastSeenAt).",
        frame: .change(
            Change(
                seq: 0, event: .presenceChanged(PresenceChanged(user: user("bob"), presence: .init(status: .available)))
            )
        )),
    .init(
        name: "change-presence-offline-last-seen",
        description: "CHANGE: bob went offline, last seen at 2026-01-01T00:00:00Z (seq 0).",
        frame: .change(
            Change(
                seq: 0,
                event: .presenceChanged(
                    PresenceChanged(user: user("bob"), presence: .init(status: .offline, lastSeenAt: t0)))))),
    .init(
        name: "create-channel", description: "CREATE_CHANNEL: a channel named \"general\" (channels feature).",
        frame: .createChannel(CreateChannel(channelID: channel1, name: try! ChannelName("general")))),
    .init(
        name: "join-channel", description: "JOIN_CHANNEL: the sender joins the channel.",
        frame: .joinChannel(ChannelRequest(requestID: u(0x19), channelID: channel1))),
    .init(
        name: "leave-channel", description: "LEAVE_CHANNEL: the sender leaves the channel.",
        frame: .leaveChannel(ChannelRequest(requestID: u(0x1A), channelID: channel1))),
    .init(
        name: "send-channel-message", description: "SEND_CHANNEL_MESSAGE: one text part to the channel.",
        frame: .sendChannelMessage(
            SendChannelMessage(messageID: MessageID(uuid: u(0xA9)), channelID: channel1, parts: [text(0xB9, "Hi all")]))
    ),
    .init(
        name: "fetch-channel", description: "FETCH_CHANNEL: up to 500 messages after log position 1200.",
        frame: .fetchChannel(FetchChannel(requestID: u(0x1B), channelID: channel1, after: 1_200, count: 500))),
    .init(
        name: "delete-channel", description: "DELETE_CHANNEL: the channel and its history, for everyone.",
        frame: .deleteChannel(ChannelRequest(requestID: u(0x1C), channelID: channel1))),
    .init(
        name: "change-channel-created", description: "CHANGE: the channel the user joined (in its feed, seq 19).",
        frame: .change(Change(seq: 19, event: .channelCreated(sampleChannel)))),
    .init(
        name: "change-channel-joined", description: "CHANGE: bob joined the channel himself (seq 20).",
        frame: .change(
            Change(
                seq: 20,
                event: .channelMembershipChanged(
                    ChannelMembershipChanged(
                        channelID: channel1, user: user("bob"), joined: true, by: user("bob"),
                        at: hlc(1_767_225_600_100, 0, 1)))))),
    .init(
        name: "change-channel-message",
        description: "CHANGE: a channel message at log position 1201 (seq 0: never in the stored feed).",
        frame: .change(Change(seq: 0, event: .channelMessage(sampleChannelMessage)))),
    .init(
        name: "change-channel-deleted", description: "CHANGE: the channel was deleted by alice (seq 21).",
        frame: .change(
            Change(
                seq: 21,
                event: .channelDeleted(
                    ChannelDeleted(channelID: channel1, by: user("alice"), at: hlc(1_767_225_602_000, 0, 1)))))),
    .init(
        name: "change-typing", description: "CHANGE: bob is typing (seq 0: not in the stored feed).",
        frame: .change(
            Change(
                seq: 0, event: .typing(TypingChanged(conversationID: conversation1, user: user("bob"), state: .started))
            ))),
    .init(
        name: "change-batch", description: "CHANGE_BATCH of three changes.",
        frame: .changeBatch(
            ChangeBatch(changes: [
                Change(
                    seq: 11,
                    event: .messageStatusChanged(
                        MessageStatusChanged(
                            conversationID: conversation1, messageID: message1, user: user("carol"), status: .delivered)
                    )),
                Change(
                    seq: 12,
                    event: .identifierChanged(IdentifierChanged(from: ConversationID(uuid: u(0xC4)), to: conversation1))
                ),
                Change(
                    seq: 13,
                    event: .messageDeleted(
                        MessageDeleted(
                            conversationID: conversation1, messageID: message1, mode: .myDevices, by: user("bob")))),
            ]))),
    .init(
        name: "peer-hello", description: "PEER_HELLO.",
        frame: .peerHello(PeerHello(nodeID: NodeID(1), minVersion: 1, maxVersion: 1, features: .all, cluster: "eu-1"))),
    .init(
        name: "version-vector", description: "VERSION_VECTOR over three origins (ascending node order).",
        frame: .versionVector(VersionVector([NodeID(1): 120, NodeID(2): 7, NodeID(0xFFFF_FFFF_FFFF_FFFF): 1]))),
    .init(
        name: "version-vector-empty", description: "VERSION_VECTOR of a new node.",
        frame: .versionVector(VersionVector())),
    .init(
        name: "replicate", description: "REPLICATE of two operations.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(1), counter: 121, hlc: hlc(1_767_225_600_000, 0, 1),
                    event: .messageCreated(sampleMessage)),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 122, hlc: hlc(1_767_225_600_001, 0, 1),
                    event: .metadataChanged(
                        MetadataChanged(
                            conversationID: conversation1, keyPath: try! MetadataKeyPath(["title"]),
                            value: .string("Dinner"), by: user("bob"), at: hlc(1_767_225_600_001, 0, 1)))),
            ]))),
    .init(
        name: "replicate-user-state",
        description:
            "REPLICATE of changes of users' state (kinds 64-67): an identity set, a block, a badge, a session revocation, an identity deleted.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(2), counter: 8, hlc: hlc(1_767_225_600_010, 0, 2),
                    payload: .user(
                        .identity(
                            IdentityChange(
                                user: user("alice"),
                                identity: .init(
                                    values: ["display_name": "Alice", "email_address": "alice@example.com"],
                                    metadata: ["team": "blue"]))))),
                ReplicatedOperation(
                    origin: NodeID(2), counter: 9, hlc: hlc(1_767_225_600_011, 0, 2),
                    payload: .user(
                        .block(BlockChange(blocker: user("alice"), blocked: user("mallory"), blocking: true)))),
                ReplicatedOperation(
                    origin: NodeID(2), counter: 10, hlc: hlc(1_767_225_600_012, 0, 2),
                    payload: .user(.badge(BadgeChange(user: user("bob"), externalUnreadCount: 3)))),
                ReplicatedOperation(
                    origin: NodeID(2), counter: 11, hlc: hlc(1_767_225_600_013, 0, 2),
                    payload: .user(.sessionsRevoked(user("bob")))),
                ReplicatedOperation(
                    origin: NodeID(2), counter: 12, hlc: hlc(1_767_225_600_014, 1, 2),
                    payload: .user(.identity(IdentityChange(user: user("carol"), identity: nil)))),
            ]))),
    .init(
        name: "replicate-identity",
        description:
            "REPLICATE of kind 64 (identity): alice's identity as the Server API set it, values and metadata as string maps in ascending key order.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 1, hlc: hlc(1_767_225_600_020, 0, 3),
                    payload: .user(
                        .identity(
                            IdentityChange(
                                user: user("alice"),
                                identity: .init(
                                    values: [
                                        "avatar_url": "https://example.com/alice.png", "display_name": "Alice",
                                        "first_name": "Alice",
                                    ], metadata: ["desk": "4F", "team": "blue"])))))
            ]))),
    .init(
        name: "replicate-identity-empty",
        description:
            "REPLICATE of kind 64 (identity): an identity present with no values and no metadata (two empty string maps).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 2, hlc: hlc(1_767_225_600_021, 0, 3),
                    payload: .user(.identity(IdentityChange(user: user("bob"), identity: .init()))))
            ]))),
    .init(
        name: "replicate-identity-deleted",
        description: "REPLICATE of kind 64 (identity): carol's identity deleted (presence byte 0, no maps).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 3, hlc: hlc(1_767_225_600_022, 0, 3),
                    payload: .user(.identity(IdentityChange(user: user("carol"), identity: nil))))
            ]))),
    .init(
        name: "replicate-block", description: "REPLICATE of kind 65 (block): alice blocks mallory.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 4, hlc: hlc(1_767_225_600_023, 0, 3),
                    payload: .user(
                        .block(BlockChange(blocker: user("alice"), blocked: user("mallory"), blocking: true))))
            ]))),
    .init(
        name: "replicate-unblock", description: "REPLICATE of kind 65 (block): alice no longer blocks mallory.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 5, hlc: hlc(1_767_225_600_024, 1, 3),
                    payload: .user(
                        .block(BlockChange(blocker: user("alice"), blocked: user("mallory"), blocking: false))))
            ]))),
    .init(
        name: "replicate-follow", description: "REPLICATE of kind 71 (follow): alice follows carol (SPEC §6.7).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 9, hlc: hlc(1_767_225_600_028, 0, 3),
                    payload: .user(
                        .follow(FollowChange(follower: user("alice"), followed: user("carol"), following: true))))
            ]))),
    .init(
        name: "replicate-unfollow", description: "REPLICATE of kind 71 (follow): alice no longer follows carol.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 10, hlc: hlc(1_767_225_600_029, 1, 3),
                    payload: .user(
                        .follow(FollowChange(follower: user("alice"), followed: user("carol"), following: false))))
            ]))),
    .init(
        name: "replicate-notification-level",
        description:
            "REPLICATE of kind 73 (notification level): bob hears only mentions in conversation 1 (SPEC §6.10).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 11, hlc: hlc(1_767_225_600_030, 0, 3),
                    payload: .user(
                        .notificationLevel(
                            NotificationLevelChange(user: user("bob"), conversationID: conversation1, level: .mentions))
                    ))
            ]))),
    .init(
        name: "replicate-parts-edited",
        description:
            "REPLICATE of kind 74 (per-part edit, peers with feature bit 20): alice's message 1 now holds parts B1 and B3; the edit set B3 (B1 unchanged) and removed B2, at its reading (SPEC §6.2).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(1), counter: 140, hlc: hlc(1_767_225_601_100, 0, 1),
                    payload: .partsEdited(
                        MessagePartsEdited(
                            conversationID: conversation1, messageID: message1,
                            parts: [text(0xB1, "hello"), text(0xB3, "edited")], set: [u(0xB3)], removed: [u(0xB2)],
                            by: user("alice"), at: hlc(1_767_225_601_100, 0, 1))))
            ]))),
    .init(
        name: "replicate-badge",
        description: "REPLICATE of kind 66 (badge): bob's external unread count set to 300 (a two-byte varint).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 6, hlc: hlc(1_767_225_600_025, 0, 3),
                    payload: .user(.badge(BadgeChange(user: user("bob"), externalUnreadCount: 300))))
            ]))),
    .init(
        name: "replicate-suspension",
        description: "REPLICATE of kind 70 (suspension): bob is suspended (cannot log in) by the Server API on node 3.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 9, hlc: hlc(1_767_225_600_028, 0, 3),
                    payload: .user(.suspension(SuspensionChange(user: user("bob"), suspended: true))))
            ]))),
    .init(
        name: "replicate-sessions-revoked",
        description:
            "REPLICATE of kind 67 (sessions-revoked): every session of bob authenticated at or before the operation's time is revoked.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 7, hlc: hlc(1_767_225_600_026, 0, 3),
                    payload: .user(.sessionsRevoked(user("bob"))))
            ]))),
    .init(
        name: "replicate-push-registration-removed",
        description:
            "REPLICATE of kind 68 (push-registration): carol's device removed its token on node 3 (END_SESSION or kind 0), which now holds its registration.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(3), counter: 8, hlc: hlc(1_767_225_600_027, 0, 3),
                    payload: .user(
                        .pushRegistration(
                            PushRegistrationChange(
                                user: user("carol"), device: u(0xD2), node: NodeID(3)))))
            ]))),
    .init(
        name: "replicate-conversation-events",
        description:
            "REPLICATE of the other conversation operations a node logs (SPEC §6.5): kinds 0 (a non-distinct creation), 2, 4, 7, 8, 10 and 11.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(1), counter: 130, hlc: hlc(1_767_225_601_000, 0, 1),
                    event: .conversationCreated(
                        Conversation(
                            id: ConversationID(uuid: u(0xC5)), participants: [user("alice"), user("bob")],
                            isDistinct: false, metadata: [:],
                            deliveryReceiptsEnabled: false, createdAt: t0, creator: user("alice")))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 131, hlc: hlc(1_767_225_601_001, 0, 1),
                    event: .participantsChanged(
                        ParticipantsChanged(
                            conversationID: conversation1, added: [user("dave")], removed: [], by: user("alice"),
                            at: hlc(1_767_225_601_001, 0, 1)))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 132, hlc: hlc(1_767_225_601_002, 0, 1),
                    event: .conversationDeleted(
                        ConversationDeleted(
                            conversationID: conversation1, mode: .allParticipants, below: hlc(1_767_225_600_000, 0, 1),
                            by: user("bob")))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 133, hlc: hlc(1_767_225_601_003, 0, 1),
                    event: .messageStatusChanged(
                        MessageStatusChanged(
                            conversationID: conversation1, messageID: message1, user: user("bob"), status: .read))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 134, hlc: hlc(1_767_225_601_004, 0, 1),
                    event: .messageDeleted(
                        MessageDeleted(
                            conversationID: conversation1, messageID: message1, mode: .allParticipants,
                            by: user("carol")))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 135, hlc: hlc(1_767_225_601_005, 0, 1),
                    event: .statusUpTo(
                        StatusUpTo(
                            conversationID: conversation1, user: user("carol"), status: .delivered,
                            upTo: hlc(1_767_225_600_000, 0, 1)))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 136, hlc: hlc(1_767_225_601_006, 0, 1),
                    event: .messagePartsChanged(
                        MessagePartsChanged(
                            conversationID: conversation1, messageID: message1, parts: [text(0xB1, "edited")],
                            by: user("alice"), at: hlc(1_767_225_601_006, 0, 1)))),
            ]))),
    .init(
        name: "replicate-push-registration",
        description: "REPLICATE of a push registration (kind 68): bob's device registered its push token on node 2.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(2), counter: 13, hlc: hlc(1_767_225_600_015, 0, 2),
                    payload: .user(
                        .pushRegistration(
                            PushRegistrationChange(
                                user: user("bob"), device: UUID(uuidString: "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab")!,
                                node: NodeID(2)))))
            ]))),
    .init(
        name: "replicate-distinct-creation",
        description: "REPLICATE of a distinct conversation's creation (kind 69) with the vector its origin held then.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(2), counter: 14, hlc: hlc(1_767_225_600_016, 0, 2),
                    payload: .distinctCreation(
                        DistinctCreation(
                            conversation: sampleConversation, seen: VersionVector([NodeID(1): 120, NodeID(2): 13]))))
            ]))),
    .init(
        name: "peer-ack", description: "PEER_ACK.",
        frame: .peerAck(PeerAck(vector: VersionVector([NodeID(1): 122, NodeID(2): 7])))),
    .init(
        name: "replicate-channel-events",
        description:
            "REPLICATE of the channel operations a node logs (SPEC §6.8): kinds 16, 17, 18 (log position 0) and 19.",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(1), counter: 140, hlc: hlc(1_767_225_600_000, 0, 1),
                    event: .channelCreated(sampleChannel)),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 141, hlc: hlc(1_767_225_600_100, 0, 1),
                    event: .channelMembershipChanged(
                        ChannelMembershipChanged(
                            channelID: channel1, user: user("bob"), joined: true, by: user("bob"),
                            at: hlc(1_767_225_600_100, 0, 1)))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 142, hlc: hlc(1_767_225_600_200, 0, 1),
                    event: .channelMessage(
                        ChannelMessage(
                            id: sampleChannelMessage.id, channelID: channel1, sender: user("bob"), sentAt: t0,
                            position: hlc(1_767_225_600_200, 0, 1), logSeq: 0, parts: sampleChannelMessage.parts))),
                ReplicatedOperation(
                    origin: NodeID(1), counter: 143, hlc: hlc(1_767_225_602_000, 0, 1),
                    event: .channelDeleted(
                        ChannelDeleted(channelID: channel1, by: user("alice"), at: hlc(1_767_225_602_000, 0, 1)))),
            ]))),
    .init(
        name: "peer-presence",
        description:
            "PEER_PRESENCE: the sender holds 2 devices of alice, who chose away, and no longer any of bob.",
        frame: .peerPresence(
            PeerPresence(entries: [
                .init(
                    user: user("alice"), devices: 2,
                    choice: PresenceChoice(status: .away, at: hlc(1_767_225_600_000, 0, 1)),
                    at: hlc(1_767_225_600_500, 0, 1)),
                .init(user: user("bob"), devices: 0, choice: nil, at: hlc(1_767_225_601_000, 0, 1)),
            ]))),
    .init(
        name: "peer-presence-relayed",
        description:
            "PEER_PRESENCE_RELAYED: node 3's report of carol (1 device, chose busy), passed on by a node linked to node 3.",
        frame: .peerPresenceRelayed(
            PeerPresenceRelayed(
                origin: NodeID(3),
                entries: [
                    .init(
                        user: user("carol"), devices: 1,
                        choice: PresenceChoice(status: .busy, at: hlc(1_767_225_602_000, 0, 3)),
                        at: hlc(1_767_225_602_000, 0, 3))
                ]))),
    .init(
        name: "peer-presence-withdrawn",
        description: "PEER_PRESENCE_WITHDRAWN: the sender no longer holds the reports of nodes 3 and 4.",
        frame: .peerPresenceWithdrawn(PeerPresenceWithdrawn(origins: [NodeID(3), NodeID(4)]))),
]
