import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Testing

/// Following across peer nodes (SPEC §6.7, §6.5 kind 71): a follow made on one node (the
/// Server API there) reaches the follower's devices on its peer as `follow-changed` with the
/// followed user's identity, and their presence follows; an unfollow made on the peer
/// (FOLLOW_USER) reaches the first node; both end with the same follow lists.
@Suite struct FollowingAcrossPeersTests {
    static let alice: UserID = "alice"
    static let carol: UserID = "carol"
    static let dave: UserID = "dave"

    @Test func aFollowOnOneNodeReachesTheFollowersDevicesOnTheOther() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("following-peers")
        let apiA = CurlAPI(a.server, http: .http2)
        #expect(
            try await apiA.request("POST", "/users/carol/identity", json: #"{"display_name":"Carol C."}"#).status
                == 201)
        // Carol is on node A; alice's device uses node B. They share no conversation.
        let carol = try await a.session(Self.carol, device: UUID(), features: .withPresence)
        try await carol.choose(.away)
        let alice = try await b.session(Self.alice, device: UUID(), features: .withPresence)
        #expect(try await alice.presenceUpdatesThroughBarrier(of: Self.carol).isEmpty)

        // Alice follows carol through node A's Server API: node B learns it by replication.
        #expect(try await apiA.request("PUT", "/users/alice/identities/carol").status == 204)
        let followed = try await alice.change {
            $0.event == .followChanged(FollowChanged(user: Self.carol, following: true))
        }
        #expect(followed.seq > 0, "in alice's feed on node B, so each of her devices there gets it")
        let told = try await alice.change {
            if case .identityChanged(let i) = $0.event { return i.user == Self.carol }
            return false
        }
        guard case .identityChanged(let identity) = told.event else { return }
        #expect(identity.identity?.values["display_name"] == "Carol C.")
        _ = try await alice.presence(of: Self.carol, .away)
        try await carol.choose(.busy)
        let busy = try await alice.presence(of: Self.carol, .busy)
        let apiB = CurlAPI(b.server, http: .http1)
        let listed = try await apiB.request("GET", "/users/alice/identities")
        #expect(listed.status == 200 && listed.body.contains("\"carol\""), "\(listed.body)")
        // Dave, also on node B, follows carol through node B's Server API (node A learns it).
        let dave = try await b.session(Self.dave, device: UUID(), features: .withPresence)
        #expect(try await apiB.request("PUT", "/users/dave/identities/carol").status == 204)
        _ = try await dave.presence(of: Self.carol, .busy)
        try await ResourceLimitTests.eventuallyAsync("dave's follow to reach node A") {
            (try? await a.server.store.read { r in try r.followers(of: Self.carol) }) == [Self.alice, Self.dave]
        }

        // Alice unfollows from her device on node B: node A learns it, and carol's presence
        // stops reaching her.
        let id = UUID()
        _ = try await alice.command(.followUser(FollowUser(requestID: id, user: Self.carol, following: false)), id: id)
        _ = try await alice.change { $0.event == .followChanged(FollowChanged(user: Self.carol, following: false)) }
        try await ResourceLimitTests.eventuallyAsync("the unfollow to reach node A") {
            (try? await a.server.store.read { r in try r.followees(of: Self.alice) })?.isEmpty == true
        }
        try await carol.choose(.available)
        // Once dave (still following, on the same node) sees it, alice would have too.
        _ = try await dave.presence(of: Self.carol, .available)
        #expect(try await alice.presenceUpdatesThroughBarrier(of: Self.carol).isEmpty, "after \(busy)")
        // The two nodes hold the same replicated state about users (follows included).
        try await ResourceLimitTests.eventuallyAsync("the users' digests to agree") {
            let da = try? await a.server.engine.convergenceDigest()
            let db = try? await b.server.engine.convergenceDigest()
            return da != nil && da?.users == db?.users
        }
        await alice.close()
        await dave.close()
        await carol.close()
        await b.stop()
        await a.stop()
    }
}
