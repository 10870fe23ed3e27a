import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Channels on the Client API (`/channels`, Protocol/CLIENT-API.yaml) with curl over HTTP/1.1
/// and HTTP/2: create (the Web SDK's body), retry, a taken name, join and leave oneself only,
/// the members and the log paged newest first, members-only reads, the creator's deletion.
@Suite struct ClientAPIChannelTests {
    static func uuid(_ id: Any?) -> String { ((id as? String) ?? "").components(separatedBy: "/").last ?? "" }
    static func positions(_ response: CurlAPI.Response) -> [Int] {
        response.array.compactMap { $0["position"] as? Int }
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func theRESTResourcesCreateJoinPageAndDelete(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("client-channels-\(http == .http1 ? "h1" : "h2")")
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let bob = try await ClientAPICurl.session("bob", on: node, http: http)

        // Created as the Web SDK's `Channel.create` data names it; the creator is a member.
        let chosen = UUID().uuidString.lowercased()
        let body =
            #"{"id":"layer:///channels/\#(chosen)","name":"rest-room","members":["layer:///identities/alice"],"metadata":null}"#
        let created = try await alice.request("POST", "/channels", json: body)
        #expect(created.status == 201, "\(created.body)")
        #expect(created.object["id"] as? String == "layer:///channels/\(chosen)")
        #expect(created.object["name"] as? String == "rest-room")
        #expect(created.object["member_count"] as? Int == 1)
        #expect(
            (created.object["membership"] as? [String: Any])?["id"] as? String
                == "layer:///channels/\(chosen)/members/alice")
        #expect(created.headers["location"]?.hasSuffix("/channels/\(chosen)") == true)
        // A retry answers the same; the name taken by another id is 409 with the channel in data.
        #expect(try await alice.request("POST", "/channels", json: body).status == 201)
        let taken = try await bob.request("POST", "/channels", json: #"{"name":"rest-room"}"#)
        #expect(taken.status == 409 && taken.object["id"] as? String == "conflict", "\(taken.body)")
        #expect((taken.object["data"] as? [String: Any])?["id"] as? String == "layer:///channels/\(chosen)")
        #expect(!(((taken.object["data"] as? [String: Any])?["membership"]) is [String: Any]))
        // Others are not made members by a creation; channels have no metadata; names are checked.
        let others = try await alice.request("POST", "/channels", json: #"{"name":"x","members":["bob"]}"#)
        #expect(others.status == 403 && others.object["id"] as? String == "access_denied", "\(others.body)")
        let metadata = try await alice.request("POST", "/channels", json: #"{"name":"y","metadata":{"a":"b"}}"#)
        #expect(metadata.status == 422 && metadata.object["id"] as? String == "invalid_property")
        #expect(try await alice.request("POST", "/channels", json: #"{"name":""}"#).status == 422)
        #expect(try await alice.request("POST", "/channels", json: #"{}"#).status == 422)

        // Anyone sees the channel (to join it); only members read or send.
        let seen = try await bob.request("GET", "/channels/\(chosen)")
        #expect(seen.status == 200 && seen.object["membership"] == nil, "\(seen.body)")
        #expect(try await bob.request("GET", "/channels/\(chosen)/messages").status == 403)
        let outsider = try await bob.request(
            "POST", "/channels/\(chosen)/messages", json: #"{"parts":[{"mime_type":"text/plain","body":"no"}]}"#)
        #expect(outsider.status == 403, "\(outsider.body)")
        #expect(try await bob.request("GET", "/channels/\(UUID().uuidString)").status == 404)

        var ids: [String] = []
        for i in 1...5 {
            let sent = try await alice.request(
                "POST", "/channels/\(chosen)/messages", json: #"{"parts":[{"mime_type":"text/plain","body":"m\#(i)"}]}"#
            )
            #expect(sent.status == 201 && sent.object["position"] as? Int == i, "\(sent.body)")
            #expect(sent.object["recipient_status"] as? [String: String] == [:])
            ids.append(Self.uuid(sent.object["id"]))
        }

        // Joining oneself only; then the history is the member's, paged newest first.
        #expect(try await bob.request("PUT", "/channels/\(chosen)/members/alice").status == 403)
        #expect(try await bob.request("PUT", "/channels/\(chosen)/members/bob").status == 204)
        #expect(
            try await bob.request("PUT", "/channels/\(chosen)/members/layer:%2F%2F%2Fidentities%2Fbob").status == 204)
        let mine = try await bob.request("GET", "/channels")
        #expect(mine.status == 200 && mine.headers["layer-count"] == "1")
        #expect(mine.array.first?["member_count"] as? Int == 2)
        let newest = try await bob.request("GET", "/channels/\(chosen)/messages?page_size=2")
        #expect(Self.positions(newest) == [5, 4] && newest.headers["layer-count"] == "5", "\(newest.body)")
        let older = try await bob.request("GET", "/channels/\(chosen)/messages?page_size=2&from_id=\(ids[3])")
        #expect(Self.positions(older) == [3, 2], "\(older.body)")
        let oldest = try await bob.request("GET", "/channels/\(chosen)/messages?page_size=2&from_id=\(ids[1])")
        #expect(Self.positions(oldest) == [1], "\(oldest.body)")
        #expect(try await bob.request("GET", "/channels/\(chosen)/messages?page_size=0").status == 422)
        let one = try await bob.request("GET", "/channels/\(chosen)/messages/\(ids[0])")
        #expect(one.status == 200 && (one.object["parts"] as? [[String: Any]])?.first?["body"] as? String == "m1")
        #expect((one.object["sender"] as? [String: Any])?["user_id"] as? String == "alice")

        // Members, paged by user id.
        let members = try await bob.request("GET", "/channels/\(chosen)/members")
        #expect(members.headers["layer-count"] == "2")
        #expect(
            members.array.compactMap { ($0["identity"] as? [String: Any])?["user_id"] as? String } == ["alice", "bob"])
        let after = try await bob.request("GET", "/channels/\(chosen)/members?from_id=alice")
        #expect(after.array.compactMap { $0["id"] as? String } == ["layer:///channels/\(chosen)/members/bob"])
        #expect(try await bob.request("GET", "/channels/\(chosen)/members/bob").status == 200)
        #expect(try await bob.request("GET", "/channels/\(chosen)/members/carol").status == 404)

        // Only the creator deletes; a member leaves (then reads nothing).
        #expect(try await bob.request("DELETE", "/channels/\(chosen)").status == 403)
        #expect(try await bob.request("DELETE", "/channels/\(chosen)/members/alice").status == 403)
        #expect(try await bob.request("DELETE", "/channels/\(chosen)/members/bob").status == 204)
        #expect(try await bob.request("DELETE", "/channels/\(chosen)/members/bob").status == 204)
        #expect(try await bob.request("GET", "/channels/\(chosen)/messages").status == 403)
        #expect(try await bob.request("GET", "/channels").headers["layer-count"] == "0")
        #expect(try await alice.request("DELETE", "/channels/\(chosen)").status == 204)
        #expect(try await alice.request("GET", "/channels/\(chosen)").status == 404)
        // The name is free again.
        #expect(try await bob.request("POST", "/channels", json: #"{"name":"rest-room"}"#).status == 201)
        await node.stop()
    }
}
