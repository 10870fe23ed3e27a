import Foundation
import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers
import Testing

@testable import LaminaNode

/// The push outbox: rows written in the send's own commit, one per message per recipient device
/// that has a token of a configured provider and no live session; nobody woken for a rollback.
@Suite struct PushOutboxTests {
    struct Woken: Sendable {
        let calls = NIOLockedValueBox<[[PushToken.Kind: Int]]>([])
        var all: [[PushToken.Kind: Int]] { calls.withLockedValue { $0 } }
    }

    static func configure(_ h: EngineHarness, kinds: Set<PushToken.Kind> = [.gateway, .fcm]) -> Woken {
        let woken = Woken()
        h.engine.pushes.configure(kinds: kinds, expirationSeconds: 3_600) { [calls = woken.calls] counts in
            calls.withLockedValue { $0.append(counts) }
        }
        return woken
    }

    @Test func aSendQueuesOnePushPerOfflineRecipientDeviceInItsCommit() async throws {
        let h = try EngineHarness()
        let woken = Self.configure(h)
        let liveDevice = UUID()
        try await h.store.write { tx in
            try tx.setPushToken(.gateway(token: "bob-offline"), user: "bob", device: "bob-phone", at: .now())
            try tx.setPushToken(
                .gateway(token: "bob-live"), user: "bob", device: liveDevice.uuidString.lowercased(), at: .now())
            try tx.setPushToken(.gateway(token: "alice-offline"), user: "alice", device: "alice-tablet", at: .now())
            // A provider the node does not deliver to: no push.
            try tx.setPushToken(
                .apns(token: Array(repeating: 7, count: 32), topic: "t", environment: .sandbox), user: "carol",
                device: "carol-phone", at: .now())
            try tx.setPushToken(.fcm(token: "carol-android"), user: "carol", device: "carol-android", at: .now())
        }
        let alice = try await h.connect("alice")
        _ = try await h.connect("bob", device: liveDevice)
        let conversation = ConversationID.random()
        _ = try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob", "carol"])))
        let id = MessageID.random()
        let push = PushConfiguration(alert: "hi", data: ["k": "v"])
        let (reply, _) = try await alice.command(
            .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("hi")], push: push)))
        #expect(reply.ack != nil)
        // Acknowledged means committed, with its pushes: bob's offline phone and carol's Android.
        let queued = try await h.store.read { r in try r.queuedPushes(of: id) }
        #expect(Set(queued.map(\.device)) == ["bob-phone", "carol-android"])
        #expect(woken.all == [[.gateway: 1, .fcm: 1]])
        let notification = try PushNotification.decode(try #require(queued.first).payload)
        #expect(notification.alert == "hi" && notification.data == ["k": "v"] && notification.sender == "alice")
        // The badge is counted when the push is sent, not in the send's commit.
        #expect(notification.badge == 0)
        #expect(try await h.store.read { r in try PushOutbox.badge(of: "bob", r) } == 1)
        await h.close()
    }

    /// A command that fails after recording rolls back its savepoint: no row stays, and nobody
    /// is woken for it (its group still commits the others' writes).
    @Test func aRolledBackCommandQueuesNothingAndAMessageIsQueuedOncePerDevice() async throws {
        let h = try EngineHarness()
        let woken = Self.configure(h)
        try await h.store.write { tx in
            try tx.setPushToken(.gateway(token: "bob"), user: "bob", device: "bob-phone", at: .now())
        }
        let message = Message(
            id: .random(), conversationID: .random(), sender: "alice", parts: [textPart("x")], sentAt: .now())
        let outbox = h.engine.pushes
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await h.store.write { tx in
                try outbox.record(message, to: ["alice", "bob"], in: tx, at: .now())
                throw Abort()
            }
        }
        #expect(try await h.store.read { r in try r.queuedPushes(of: message.id) }.isEmpty)
        #expect(woken.all.isEmpty)
        let before = woken.all.count
        try await h.store.write { tx in
            try outbox.record(message, to: ["bob"], in: tx, at: .now())
            try outbox.record(message, to: ["bob"], in: tx, at: .now())
        }
        #expect(try await h.store.read { r in try r.queuedPushes(of: message.id) }.count == 1)
        #expect(Array(woken.all.dropFirst(before)) == [[.gateway: 1]])
        await h.close()
    }
}
