import Foundation
import LaminaClient
import LaminaModel
import Testing

/// Edits by the sender through the SDK on a real node (issue 38 item 2): an edit made while
/// offline is queued and goes out on reconnect, the other participant's device sees the new
/// parts as an update with before and after and the edit time, and only the sender may edit.
@Suite struct ClientSDKEditTests {
    @Test func anEditMadeOfflineReachesTheOtherDeviceWithBeforeAndAfter() async throws {
        let node = try await TestNode.start("sdk-edits")
        let alice = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        for client in [alice, bob] { try await ClientHarness.connect(client, on: node) }
        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let id = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "see you at 12")]), in: conversation).id
        try await ClientHarness.waitUntil(alice, "the message sent") { try alice.isSent(id) }
        _ = try await bob.waitForCreation(of: id, timeout: .seconds(30))
        #expect(try bob.message(id)?.editedAt == nil)

        // Only the sender may edit; an unsent or unknown message cannot be.
        #expect(throws: ClientError.self) { try bob.edit(id, parts: [MessagePart.with(text: "hijacked")]) }
        #expect(throws: ClientError.self) { try alice.edit(MessageID.random(), parts: [MessagePart.with(text: "x")]) }

        // Offline: the edit shows at once on Alice's device and waits in the outbox.
        await alice.disconnect()
        let changes = bob.changes()
        let newParts = [try MessagePart.with(text: "see you at 12:30")]
        try alice.edit(id, parts: newParts)
        #expect(try alice.message(id)?.message.parts.map(\.inlineBytes) == [Array("see you at 12:30".utf8)])
        #expect(try alice.message(id)?.editedAt != nil)
        try await ClientHarness.connect(alice, on: node)

        try await ClientHarness.waitUntil(bob, "the edit at Bob") {
            try bob.message(id)?.message.parts.map(\.inlineBytes) == [Array("see you at 12:30".utf8)]
        }
        let edited = try #require(try bob.message(id))
        let editedAt = try #require(edited.editedAt)
        #expect(abs(editedAt.millisecondsSince1970 - Timestamp.now().millisecondsSince1970) < 60_000)
        var update: ObjectChange?
        for await batch in changes {
            update = batch.first { $0.property == MessageProperty.parts }
            if update != nil { break }
        }
        guard case .parts(let before)? = update?.before, case .parts(let after)? = update?.after else {
            Issue.record("no parts change with before and after: \(String(describing: update))")
            return
        }
        #expect(before.map(\.inlineBytes) == [Array("see you at 12".utf8)])
        #expect(after.map(\.inlineBytes) == [Array("see you at 12:30".utf8)])
        // The node holds the edit (its parts as the device's), and it does not reach Alice twice.
        let stored = try #require(try await node.server.engine.store.read { try $0.message(id) })
        #expect(stored.message.parts.map(\.inlineBytes) == [Array("see you at 12:30".utf8)])
        for client in [alice, bob] { try await client.close() }
        await node.stop()
    }
}
