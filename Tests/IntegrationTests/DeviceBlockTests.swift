import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Blocking from a device (SPEC §5.10 BLOCK_USER): alice blocks carol on one device; her other
/// device learns it (`blockedUsers`), carol's later messages and typing reach neither, and an
/// unblock from the other device restores both.
@Suite struct DeviceBlockTests {
    @Test func aDeviceBlocksCarolHerMessagesAndTypingStopAndUnblockRestoresThem() async throws {
        let node = try await TestNode.start("device-block")
        let alice = try ClientHarness.device("alice", on: node)
        let aliceOther = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        let carol = try ClientHarness.device("carol", on: node)
        var events: [Recorder<SyncEngine.Event>] = []
        for device in [alice, aliceOther, bob, carol] {
            events.append(try await ClientHarness.connectLive(device, on: node))
        }
        let (aliceEvents, bobEvents) = (events[0], events[2])
        let api = CurlAPI(node.server, http: .http1)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","bob","carol"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let conversationID = ConversationID(uuid: try #require(UUID(uuidString: conversation)))
        for device in [alice, aliceOther, bob, carol] {
            _ = try await device.waitForCreation(of: conversationID, timeout: .seconds(30))
        }
        @Sendable func carolTyping(_ state: TypingState) -> @Sendable ([SyncEngine.Event]) -> Bool {
            { all in
                all.contains { if case .typing(let t) = $0 { t.user == "carol" && t.state == state } else { false } }
            }
        }

        // Block on one device: the node's list has carol.
        try await alice.block("carol")
        #expect(try await node.server.engine.store.read { try $0.blocks(of: "alice") } == ["carol"])

        // Carol types (bob sees it: the node relayed it) and writes; then bob writes. Alice's
        // devices get bob's message, which came after all of it in the node's order, and
        // nothing of carol; both know carol is blocked (the change came earlier in the feed).
        try await carol.typing(.started, in: conversationID)
        try await bobEvents.wait("carol typing on bob's device", timeout: .seconds(30), carolTyping(.started))
        let fromCarol = try await BlockedSenderTests.send(api, conversation, from: "carol", "while blocked")
        let marker = try await BlockedSenderTests.send(api, conversation, from: "bob", "marker")
        for device in [alice, aliceOther] {
            _ = try await device.waitForCreation(of: marker, timeout: .seconds(30))
            #expect(try device.message(fromCarol) == nil)
            #expect(try device.blockedUsers == ["carol"])
        }
        #expect(!carolTyping(.started)(aliceEvents.all))
        #expect(alice.typingParticipants(in: conversationID)["carol"] == nil)
        #expect(try bob.message(fromCarol) != nil)
        try await carol.typing(.finished, in: conversationID)

        // Unblock from the other device: carol's next message and typing reach alice again,
        // and both devices know the list is empty.
        try await aliceOther.unblock("carol")
        let again = try await BlockedSenderTests.send(api, conversation, from: "carol", "after unblock")
        for device in [alice, aliceOther] {
            _ = try await device.waitForCreation(of: again, timeout: .seconds(30))
            #expect(try device.blockedUsers.isEmpty)
        }
        try await carol.typing(.started, in: conversationID)
        try await aliceEvents.wait("carol typing on alice's device", timeout: .seconds(30), carolTyping(.started))

        // The rule is the Server API's: blocking oneself is refused.
        await #expect(throws: ClientError.self) { try await alice.block("alice") }

        for device in [alice, aliceOther, bob, carol] { try await device.close() }
        await node.stop()
    }
}
