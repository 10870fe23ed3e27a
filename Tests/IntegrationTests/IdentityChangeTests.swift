import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Server API identities reach devices (SPEC §6.4 `identity-changed`): a participant's device
/// learns another participant's identity when the backend creates, patches and deletes it, as
/// object changes of `.identity`; a user sharing no conversation is not told.
@Suite struct IdentityChangeTests {
    /// The first `.identity` change about `user` from `changes` of type `type`.
    static func next(_ type: ObjectChangeType, of user: UserID, in changes: AsyncStream<[ObjectChange]>) async
        -> ObjectChange?
    {
        for await batch in changes {
            for change in batch where change.type == type {
                if case .identity(let i) = change.object, i.userID == user { return change }
            }
        }
        return nil
    }

    @Test func identityCreatedPatchedAndDeletedReachParticipantsDevicesLive() async throws {
        let node = try await TestNode.start("api-identity-live")
        let bob = try ClientHarness.device("bob", on: node)
        let carol = try ClientHarness.device("carol", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        _ = try await ClientHarness.connectLive(carol, on: node)
        let changes = bob.changes()
        let api = CurlAPI(node.server, http: .http2)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        #expect(created.status == 201, "\(created.body)")

        // Create: bob's device holds alice's identity and was told.
        let posted = try await api.request(
            "POST", "/users/alice/identity",
            json: """
                {"display_name":"Alice","avatar_url":"https://example.com/alice.png","first_name":"Alice","email_address":"alice@example.com","metadata":{"team":"blue"}}
                """)
        #expect(posted.status == 201, "\(posted.body)")
        let create = await Self.next(.create, of: "alice", in: changes)
        guard case .identity(let first)? = create?.object else {
            Issue.record("no identity creation reached bob's device")
            return
        }
        #expect(first.displayName == "Alice")
        #expect(first.avatarURL == "https://example.com/alice.png")
        #expect(first.emailAddress == "alice@example.com")
        #expect(first.metadata == ["team": "blue"])
        #expect(try bob.identity(of: "alice") == first)

        // PATCH (over HTTP/1.1 this time): an update with before and after.
        let patched = try await CurlAPI(node.server, http: .http1).request(
            "PATCH", "/users/alice/identity",
            json:
                #"[{"operation":"set","property":"display_name","value":"Alice A."},{"operation":"delete","property":"metadata.team"}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(patched.status == 204, "\(patched.body)")
        let update = await Self.next(.update, of: "alice", in: changes)
        #expect(update?.property == "identity")
        guard case .identity(let before)? = update?.before, case .identity(let after)? = update?.after else {
            Issue.record("an identity update without before and after: \(String(describing: update))")
            return
        }
        #expect(before.displayName == "Alice" && after.displayName == "Alice A.")
        #expect(after.metadata.isEmpty && after.firstName == "Alice")
        #expect(try bob.identity(of: "alice")?.displayName == "Alice A.")

        // Delete: gone from the device.
        let deleted = try await api.request("DELETE", "/users/alice/identity")
        #expect(deleted.status == 204, "\(deleted.body)")
        #expect(await Self.next(.delete, of: "alice", in: changes) != nil)
        #expect(try bob.identity(of: "alice") == nil)

        // Carol shares no conversation with alice: a conversation made after every change
        // reaches her device (her feed is ordered), and she never learned alice's identity.
        let later = try await api.request("POST", "/conversations", json: #"{"participants":["carol","dave"]}"#)
        let laterID = ConversationID(
            uuid: try #require(UUID(uuidString: ServerAPITests.conversationUUID(later.object))))
        _ = try await carol.waitForCreation(of: laterID, timeout: .seconds(30))
        let carolChanges = try await node.server.engine.store.read { reader in
            try reader.feed(of: "carol", after: 0, limit: 1_000).filter { $0.kind == 12 }
        }
        #expect(carolChanges.isEmpty)
        #expect(try carol.identity(of: "alice") == nil)

        try await bob.close()
        try await carol.close()
        await node.stop()
    }

    /// A new device that fills its store from a snapshot (SPEC §6.3) learns the identities of
    /// the users it shares conversations with, and its user's block list.
    @Test func aSnapshotCarriesIdentitiesAndTheBlockList() async throws {
        let node = try await TestNode.start("api-identity-snapshot")
        let api = CurlAPI(node.server, http: .http1)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversationID = ConversationID(
            uuid: try #require(UUID(uuidString: ServerAPITests.conversationUUID(created.object))))
        #expect(
            try await api.request("POST", "/users/alice/identity", json: #"{"display_name":"Alice"}"#).status == 201)
        #expect(try await api.request("POST", "/users/bob/blocks", json: #"{"user_id":"mallory"}"#).status == 204)
        let bob = try ClientHarness.device("bob", on: node) { $0.synchronizationPolicy = .completeHistory }
        _ = try await ClientHarness.connectLive(bob, on: node)
        // The snapshot's identities and block list come before its ACK, so before the session is live.
        _ = try await bob.waitForCreation(of: conversationID, timeout: .seconds(30))
        #expect(try bob.identity(of: "alice")?.displayName == "Alice")
        #expect(try bob.blockedUsers == ["mallory"])
        try await bob.close()
        await node.stop()
    }
}
