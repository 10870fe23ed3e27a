import Foundation
import LaminaModel
import LaminaWire

// Replies and threads (SPEC §6.2, §6.3 policy 4, §6.4 kind 21; replies feature, bit 15).

let threadRoot = MessageID(uuid: u(0xA1))
let sampleReply = Message(
    id: MessageID(uuid: u(0xA3)), conversationID: conversation1, sender: user("bob"),
    parts: [text(0xB3, "Fine, thanks")], sentAt: Timestamp(millisecondsSince1970: 1_767_225_600_500),
    position: hlc(1_767_225_600_500, 0, 1), recipientStatus: [user("alice"): .sent, user("bob"): .read],
    replyTo: threadRoot)
let sampleRootWithThread: Message = {
    var m = sampleMessage
    m.thread = MessageThread(replyCount: 2, lastReply: sampleReply.id, lastReplyAt: hlc(1_767_225_600_500, 0, 1))
    return m
}()

let threadValidVectors: [ValidVector] = [
    .init(
        name: "send-reply", description: "SEND_REPLY: a text reply in the thread of message a1.",
        frame: .sendMessage(
            SendMessage(
                messageID: MessageID(uuid: u(0xA3)), conversationID: conversation1, parts: [text(0xB3, "Fine, thanks")],
                replyTo: threadRoot))),
    .init(
        name: "fetch-history-thread",
        description: "FETCH_HISTORY policy 4: the first 100 replies to a1 after a position.",
        frame: .fetchHistory(
            FetchHistory(
                requestID: u(26), conversationID: conversation1,
                policy: .thread(root: threadRoot, after: hlc(1_767_225_600_000, 0, 1), count: 100)))),
    .init(
        name: "change-thread-message-reply", description: "CHANGE thread-message (kind 21): a reply to a1 (role 1).",
        frame: .change(Change(seq: 9, event: .messageCreated(sampleReply)))),
    .init(
        name: "change-thread-message-root",
        description:
            "CHANGE thread-message (kind 21) in a history answer: root a1 with 2 replies, the last a3 (role 2).",
        frame: .change(Change(seq: 0, event: .messageCreated(sampleRootWithThread)))),
    .init(
        name: "replicate-reply", description: "REPLICATE of a reply (kind 21, role 1).",
        frame: .replicate(
            Replicate(operations: [
                ReplicatedOperation(
                    origin: NodeID(1), counter: 123, hlc: hlc(1_767_225_600_500, 0, 1),
                    event: .messageCreated(sampleReply))
            ]))),
]

/// A kind 21 change with `tail` after the message's bytes.
private func threadChange(_ tail: [UInt8]) -> [UInt8] {
    var plain = sampleReply
    plain.replyTo = nil
    let kind6 = B.encoded(.change(Change(seq: 0, event: .messageCreated(plain))))
    // Drop the header (8 bytes), seq (1) and kind (1); put kind 21 and the tail.
    return B.frame(.change, [0, 21] + Array(kind6.dropFirst(10)) + tail)
}

let threadInvalidVectors: [InvalidVector] = [
    .init(
        name: "thread-message-bad-role", description: "CHANGE thread-message (kind 21) with role 3.",
        bytes: threadChange([3]), error: .malformed),
    .init(
        name: "thread-message-no-replies",
        description: "CHANGE thread-message (kind 21), role 2 with a reply count of 0.",
        bytes: threadChange([2, 0] + B.uuid(u(0xA3)) + B.hlc(1_767_225_600_500, 0, 1)), error: .malformed),
    .init(
        name: "history-thread-zero", description: "FETCH_HISTORY thread (policy 4) with count 0.",
        bytes: B.frame(.fetchHistory, reqID + conv + [4, 0, 0] + B.uuid(u(0xA1)) + [0]), error: .invalidArgument),
    .init(
        name: "send-reply-truncated", description: "SEND_REPLY that ends inside its replyTo.",
        bytes: B.frame(.sendReply, B.uuid(u(0xA3)) + conv + [0, 0, 0]), error: .truncated),
]
