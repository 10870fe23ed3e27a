import Foundation
import LaminaClient
import LaminaModel
import Testing

/// The SDK's query target for identities (#36 item 2): the identities a device holds, live,
/// filtered by whether the user follows them and sorted by display name; following and
/// unfollowing move an identity in and out of a `isFollowed` query.
@Suite struct ClientSDKIdentityQueryTests {
    @Test func aLiveQueryOverIdentitiesFollowsFollowingAndIdentityChanges() async throws {
        let node = try await TestNode.start("sdk-identity-query")
        let api = CurlAPI(node.server, http: .http2)
        for (user, name) in [("carol", "Carol"), ("dave", "Dave")] {
            let set = try await api.request("POST", "/users/\(user)/identity", json: #"{"display_name":"\#(name)"}"#)
            #expect(set.status == 201, "\(set.body)")
        }
        let alice = try ClientHarness.device("alice", on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)

        let followed = try alice.queryController(
            for: Query<StoredUserIdentity>(
                predicate: .property(IdentityProperty.isFollowed, .equalTo, .bool(true)),
                sortDescriptors: [QuerySortDescriptor(IdentityProperty.displayName)]))
        #expect(try followed.start().isEmpty)
        let updates = Recorder(followed.updates)

        try await alice.follow("dave")
        try await alice.follow("carol")
        try await updates.wait("carol and dave followed, by display name") {
            $0.contains { $0.objects.map(\.id) == ["carol", "dave"] }
        }
        #expect(try alice.store.identifiers(Query<StoredUserIdentity>()).contains("carol"))

        // An identity change is an update of the object in place.
        let renamed = try await api.request("PUT", "/users/carol/identity", json: #"{"display_name":"Zoe"}"#)
        #expect(renamed.status == 204 || renamed.status == 200, "\(renamed.body)")
        try await updates.wait("carol renamed Zoe sorts after dave") {
            $0.contains {
                $0.objects.map(\.id) == ["dave", "carol"] && $0.objects.last?.identity.values["display_name"] == "Zoe"
            }
        }

        // Unfollowed: dave leaves the query (his identity stays held, not followed).
        try await alice.unfollow("dave")
        try await updates.wait("dave unfollowed") { $0.contains { $0.objects.map(\.id) == ["carol"] } }
        let all = try alice.store.execute(
            Query<StoredUserIdentity>(predicate: .property(IdentityProperty.userID, .equalTo, .user("dave"))))
        #expect(all.map(\.isFollowed) == [false] || all.isEmpty)

        // A property identities do not have is refused.
        #expect(throws: ClientError.self) {
            _ = try alice.store.execute(
                Query<StoredUserIdentity>(predicate: .property("participants", .contains, .user("carol"))))
        }
        followed.stop()
        try await alice.close()
        await node.stop()
    }
}
