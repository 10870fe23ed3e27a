import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOCore
import Testing

@testable import LaminaNode

/// A catch-up reads `message-created` entries as their encodings (`feed(…, encodingMessages:
/// true)`: `StoredMessageEncoding`, the stored body copied, each viewer's statuses written as the
/// store derives them) and sends those bytes. For every viewer they must be byte for byte the
/// encoding of the message the store builds for that viewer.
@Suite struct StoredMessageFeedTests {
    @Test(arguments: [true, false])
    func eachViewersEncodedEntriesAreItsMessagesEncodings(receipts: Bool) async throws {
        let h = try EngineHarness()
        let users: [UserID] = ["alice", "bob", "carol", "dave", "ünï", "zed-9"]
        var clients: [UserID: Client] = [:]
        for user in users { clients[user] = try await h.connect(user, sync: false) }
        let alice = try #require(clients["alice"])
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: Set(users.dropFirst()),
                    options: ConversationOptions(
                        isDistinct: false, deliveryReceiptsEnabled: receipts, readReceiptsEnabled: receipts))))
        func send(_ user: UserID, _ message: SendMessage) async throws {
            let (reply, _) = try await #require(clients[user]).command(.sendMessage(message))
            #expect(reply.ack != nil, "\(reply)")
        }
        let root = MessageID.random()
        try await send(
            "alice",
            SendMessage(
                messageID: root, conversationID: conversation, parts: [textPart("root"), textPart("second part")],
                push: PushConfiguration(alert: "hi", sound: "ding"), mentions: ["bob", "ünï"]))
        try await send(
            "bob",
            SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("a reply")], replyTo: root)
        )
        try await send(
            "dave", SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("dave")]))
        let last = MessageID.random()
        try await send("alice", SendMessage(messageID: last, conversationID: conversation, parts: [textPart("last")]))
        // Statuses of every origin: a delivery range, a read mark, the recorded status of a
        // participant who then leaves (dave: also a sender who is no participant any more).
        let position = try await h.store.read { r in try r.message(last)!.message.position! }
        for user: UserID in ["bob", "dave"] {
            try await #require(clients[user]).command(
                .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: conversation, upTo: position)))
        }
        try await #require(clients["carol"]).command(
            .markRead(MarkRead(requestID: UUID(), conversationID: conversation, messageID: root)))
        let (removed, _) = try await alice.command(
            .removeParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: ["dave"])))
        #expect(removed.ack != nil)

        for viewer in users + ["nobody"] {
            let (built, encoded) = try await h.store.read { r in
                (
                    try r.feed(of: viewer, after: 0, limit: 100),
                    try r.feed(of: viewer, after: 0, limit: 100, encodingMessages: true)
                )
            }
            #expect(built.count == encoded.count, "\(viewer)")
            let messages = built.filter { $0.createdMessage != nil }.count
            #expect(messages == (viewer == "nobody" ? 0 : 4), "\(viewer)")
            #expect(encoded.filter { $0.createdEncoding != nil }.count == messages, "\(viewer)")
            #expect(encoded.allSatisfy { $0.createdMessage == nil })
            var expected: [Change] = []
            var sent: [Change] = []
            for (b, e) in zip(built, encoded) {
                let reference = try FeedCoding.decode(b)
                let change = try FeedCoding.decode(e)
                #expect(
                    Array(try Frame.change(change).encoded().readableBytesView)
                        == Array(try Frame.change(reference).encoded().readableBytesView), "\(viewer) seq \(b.seq)")
                #expect(change == reference, "\(viewer) seq \(b.seq)")
                #expect(change.kind == reference.kind)
                expected.append(reference)
                sent.append(change)
            }
            // As a catch-up sends them: in batches.
            let features = FeatureSet.all
            #expect(FeedCoding.sendsStoredMessages(features))
            let frames = try FeedCoding.frames(sent, for: features).map { Array(try $0.encoded().readableBytesView) }
            let reference = try FeedCoding.frames(expected, for: features).map {
                Array(try $0.encoded().readableBytesView)
            }
            #expect(frames == reference, "\(viewer)")
        }
        await h.close()
    }
}
