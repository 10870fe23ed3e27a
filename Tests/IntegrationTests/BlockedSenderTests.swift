import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// The block rule (SPEC §6.4) beyond the live feed: a user who blocks someone gets none of
/// their messages in history fetches or in the Server API's listing as that user, and their
/// unread counts (per conversation on the device, and the badge's totals) leave them out; the
/// counts move as soon as the block list changes.
@Suite struct BlockedSenderTests {
    static func send(_ api: CurlAPI, _ conversation: String, from user: String, _ text: String) async throws
        -> MessageID
    {
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"sender_id":"layer:///identities/\(user)","parts":[{"body":"\(text)","mime_type":"text/plain"}]}
                """)
        #expect(sent.status == 201, "\(sent.body)")
        return MessageID(
            uuid: try #require(UUID(uuidString: PartUpdateTests.uuid(sent.object["id"], after: "layer:///messages/"))))
    }

    static func bodies(_ response: CurlAPI.Response) -> [String] {
        response.array.compactMap { ($0["parts"] as? [[String: Any]])?.first?["body"] as? String }
    }

    @Test func aBlockedSendersMessagesLeaveHistoryListingsAndCounts() async throws {
        let node = try await TestNode.start("blocked-sender")
        let alice = try ClientHarness.device("alice", on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)
        let api = CurlAPI(node.server, http: .http1)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","bob","carol"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let conversationID = ConversationID(uuid: try #require(UUID(uuidString: conversation)))
        _ = try await Self.send(api, conversation, from: "bob", "bob 1")
        _ = try await Self.send(api, conversation, from: "bob", "bob 2")
        let fromCarol = try await Self.send(api, conversation, from: "carol", "carol 1")
        try await ClientHarness.waitUntil(alice, "three unread on alice's device", timeout: .seconds(30)) {
            try alice.conversation(conversationID)?.totalNumberOfUnreadMessages == 3
        }

        // Alice blocks bob: her device's counts (the node's, which hold for the whole history)
        // drop to carol's message at once.
        let blocked = try await api.request("POST", "/users/alice/blocks", json: #"{"user_id":"bob"}"#)
        #expect(blocked.status == 204, "\(blocked.body)")
        do {
            try await ClientHarness.waitUntil(alice, "alice's counts without bob", timeout: .seconds(30)) {
                let c = try alice.conversation(conversationID)
                return c?.totalNumberOfUnreadMessages == 1 && c?.totalNumberOfMessages == 1
            }
        } catch {
            let c = try alice.conversation(conversationID)
            Issue.record(
                "alice's counts: unread \(c?.totalNumberOfUnreadMessages ?? -1), total \(c?.totalNumberOfMessages ?? -1)"
            )
            throw error
        }
        // The SDK's user totals are the node's counts: carol's message, in one conversation.
        #expect(try alice.store.totalNumberOfUnreadMessages() == 1)
        #expect(try alice.store.numberOfConversationsWithUnreadMessages() == 1)
        _ = try await Self.send(api, conversation, from: "bob", "bob 3")

        // The Server API: as alice, no message of bob; as the system, all; alice's badge counts carol's only.
        let asAlice = try await api.request("GET", "/users/alice/conversations/\(conversation)/messages")
        #expect(asAlice.status == 200)
        #expect(Self.bodies(asAlice) == ["carol 1"], "\(asAlice.body)")
        let asSystem = try await api.request("GET", "/conversations/\(conversation)/messages")
        #expect(Self.bodies(asSystem) == ["bob 3", "carol 1", "bob 2", "bob 1"], "\(asSystem.body)")
        let badge = try await api.request("GET", "/users/alice/badge")
        #expect(
            badge.object["unread_message_count"] as? Int == 1 && badge.object["unread_conversation_count"] as? Int == 1,
            "\(badge.body)")
        let carolsBadge = try await api.request("GET", "/users/carol/badge")
        #expect(carolsBadge.object["unread_message_count"] as? Int == 3, "\(carolsBadge.body)")

        // A new device of alice fetches the history: carol's message only.
        let second = try ClientHarness.device("alice", on: node) { $0.synchronizationPolicy = .completeHistory }
        _ = try await ClientHarness.connectLive(second, on: node)
        try await ClientHarness.waitUntil(second, "the conversation on the new device", timeout: .seconds(30)) {
            try second.conversation(conversationID) != nil
        }
        let fetched = try await second.fetchHistory(of: conversationID, policy: .complete)
        // (A fetch that meets the first sync's own history fill may list an id twice.)
        #expect(Set(fetched) == [fromCarol], "\(fetched)")
        #expect(try second.messages(in: conversationID).map(\.message.id) == [fromCarol])

        // Unblocked: bob's messages count again.
        let unblocked = try await api.request("DELETE", "/users/alice/blocks/bob")
        #expect(unblocked.status == 204, "\(unblocked.body)")
        try await ClientHarness.waitUntil(alice, "alice's counts with bob again", timeout: .seconds(30)) {
            try alice.conversation(conversationID)?.totalNumberOfUnreadMessages == 4
        }
        let again = try await api.request("GET", "/users/alice/conversations/\(conversation)/messages")
        #expect(Self.bodies(again).count == 4)

        try await alice.close()
        try await second.close()
        await node.stop()
    }
}
