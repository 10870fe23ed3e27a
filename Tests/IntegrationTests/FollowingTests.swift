import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Following (SPEC §6.7): following a user through the Server API or the SDK brings their
/// identity and presence to the follower's devices without a shared conversation; unfollowing
/// stops them. And a newly shared participant's identity reaches a live device (§6.4).
@Suite struct FollowingTests {
    static let alice: UserID = "alice"
    static let carol: UserID = "carol"

    @Test func followingThroughTheServerAPIAddsAndRemovesWhatADeviceReceives() async throws {
        let node = try await TestNode.start("following-server-api")
        let api = CurlAPI(node.server, http: .http2)
        let identity = try await api.request("POST", "/users/carol/identity", json: #"{"display_name":"Carol C."}"#)
        #expect(identity.status == 201, "\(identity.body)")
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        let carol = try await node.session(Self.carol, device: UUID(), features: .withPresence)
        // No shared conversation: alice is told nothing of carol.
        try await carol.choose(.away)
        #expect(try await alice.presenceUpdatesThroughBarrier(of: Self.carol).isEmpty)

        let followed = try await api.request("PUT", "/users/alice/identities/carol")
        #expect(followed.status == 204, "\(followed.body)")
        _ = try await alice.change { $0.event == .followChanged(FollowChanged(user: Self.carol, following: true)) }
        let told = try await alice.change {
            if case .identityChanged(let i) = $0.event { return i.user == Self.carol }
            return false
        }
        guard case .identityChanged(let change) = told.event else { return }
        #expect(change.identity?.values["display_name"] == "Carol C.")
        #expect(told.seq > 0, "in the feed, so every device of alice's gets it")
        _ = try await alice.presence(of: Self.carol, .away)
        let listed = try await api.request("GET", "/users/alice/identities")
        #expect(listed.status == 200 && listed.body.contains("\"carol\""), "\(listed.body)")

        // Carol's identity and presence changes now reach alice.
        let patched = try await api.request(
            "PUT", "/users/carol/identity", json: #"{"display_name":"Carol Carter"}"#)
        #expect(patched.status == 204 || patched.status == 200, "\(patched.body)")
        _ = try await alice.change {
            if case .identityChanged(let i) = $0.event { return i.identity?.values["display_name"] == "Carol Carter" }
            return false
        }
        try await carol.choose(.busy)
        _ = try await alice.presence(of: Self.carol, .busy)

        // Unfollowed: told, and carol's presence no longer comes.
        let unfollowed = try await api.request("DELETE", "/users/alice/identities/carol")
        #expect(unfollowed.status == 204, "\(unfollowed.body)")
        _ = try await alice.change { $0.event == .followChanged(FollowChanged(user: Self.carol, following: false)) }
        try await carol.choose(.available)
        #expect(try await alice.presenceUpdatesThroughBarrier(of: Self.carol).isEmpty)
        // Following oneself changes nothing; FOLLOW_USER for oneself is refused.
        #expect(try await api.request("PUT", "/users/alice/identities/alice").status == 204)
        do {
            let id = UUID()
            _ = try await alice.command(
                .followUser(FollowUser(requestID: id, user: Self.alice, following: true)), id: id)
            Issue.record("following oneself was accepted")
        } catch let failed as CommandFailed {
            #expect(failed.error.code == .invalidArgument)
        }
        await alice.close()
        await carol.close()
        await node.stop()
    }

    @Test func theSDKFollowsAndHoldsTheFollowedIdentity() async throws {
        let node = try await TestNode.start("following-sdk")
        let api = CurlAPI(node.server, http: .http2)
        #expect(
            try await api.request("POST", "/users/carol/identity", json: #"{"display_name":"Carol"}"#).status == 201)
        let alice = try ClientHarness.device(Self.alice, on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)
        try await alice.follow(Self.carol)
        try await ClientHarness.waitUntil(alice, "carol followed and her identity held") {
            try alice.followedUsers == [Self.carol] && alice.identity(of: Self.carol)?.displayName == "Carol"
        }
        #expect(try alice.identities().map(\.userID).contains(Self.carol))
        try await alice.unfollow(Self.carol)
        // The list changes no object (no object change to wake a store wait): polled.
        try await ResourceLimitTests.eventually("carol unfollowed at alice's SDK") {
            (try? alice.followedUsers.isEmpty) == true
        }
        try await alice.close()
        await node.stop()
    }

    @Test func aNewlySharedParticipantsIdentityReachesALiveDevice() async throws {
        let node = try await TestNode.start("following-new-participant")
        let api = CurlAPI(node.server, http: .http2)
        #expect(
            try await api.request("POST", "/users/carol/identity", json: #"{"display_name":"Carol"}"#).status == 201)
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        let carol = try await node.session(Self.carol, device: UUID(), features: .withPresence)
        let conversation = try await MessagingTests.conversation(carol, with: [Self.alice])
        // Alice's devices learn the conversation with its first message (SPEC §6.2).
        _ = try await MessagingTests.send(carol, conversation, "hi")
        let told = try await alice.change {
            if case .identityChanged(let i) = $0.event { return i.user == Self.carol }
            return false
        }
        #expect(told.seq == 0)
        await alice.close()
        await carol.close()
        await node.stop()
    }
}
