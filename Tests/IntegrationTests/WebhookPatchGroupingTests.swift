import Foundation
import Testing

/// One `Conversation.updated` per operation of a Server API PATCH (Protocol/WEBHOOKS.md), over
/// HTTP/1.1 and HTTP/2: an operation the node carries out as several commands (a `set` of the
/// participants adds and removes, a `set` of the whole metadata sets and deletes keys) is still
/// one event, with all its changes; an operation that changes nothing gives none.
@Suite struct WebhookPatchGroupingTests {
    static func users(_ value: Any?) -> [String]? {
        (value as? [[String: Any]])?.compactMap { $0["user_id"] as? String }
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func onePatchOperationIsOneEvent(http: CurlAPI.HTTP) async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("webhook-patch-\(http == .http1 ? "h1" : "h2")", trusting: receiver)
        let api = CurlAPI(node.server, http: http)
        let webhook = try await WebhookEventNameTests.register(
            api, url: receiver.url("/updates"), key: "events", names: ["Conversation.updated"])
        _ = try await WebhookTests.waitForStatus(api, webhook, "active")
        let conversation = try await WebhookTests.conversation(api)  // alice and bob

        let operations = """
            [{"operation":"set","property":"participants","value":["alice","carol"]},
             {"operation":"set","property":"metadata.title","value":"T"},
             {"operation":"set","property":"metadata","value":{"x":"1","y":"2"}},
             {"operation":"set","property":"metadata.x","value":"1"}]
            """
        let patched = try await api.request(
            "PATCH", "/conversations/\(conversation)", json: operations,
            contentType: "application/vnd.layer-patch+json")
        #expect(patched.status == 204, "\(patched.body)")
        // A later PATCH marks the end of the first one's events.
        let marker = try await api.request(
            "PATCH", "/conversations/\(conversation)",
            json: #"[{"operation":"set","property":"metadata.done","value":"yes"}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(marker.status == 204, "\(marker.body)")

        let posts = try await receiver.waitForPosts(4, timeout: .seconds(60))
        #expect(posts.count == 4)
        let changeLists = posts.map { ($0.json["changes"] as? [[String: Any]]) ?? [] }
        func properties(_ changes: [[String: Any]]) -> [String] { changes.compactMap { $0["property"] as? String } }

        // The participants `set` (an add and a remove): one event, one entry, old to new.
        let membership = try #require(changeLists.first { properties($0) == ["participants"] })
        #expect(Self.users(membership.first?["old_value"]) == ["alice", "bob"])
        #expect(Self.users(membership.first?["new_value"]) == ["alice", "carol"])
        // `metadata.title`: one event.
        let title = try #require(changeLists.first { properties($0) == ["metadata.title"] })
        #expect(title.first?["old_value"] is NSNull)
        #expect(title.first?["new_value"] as? String == "T")
        // The whole metadata: one event with every key it moved (title deleted, x and y set).
        let whole = try #require(changeLists.first { $0.count == 3 }, "\(changeLists.map(properties))")
        #expect(Set(properties(whole)) == ["metadata.title", "metadata.x", "metadata.y"])
        let deleted = whole.first { $0["property"] as? String == "metadata.title" }
        #expect(deleted?["old_value"] as? String == "T")
        #expect(deleted?["new_value"] is NSNull)
        // `metadata.x` set to what it was: nothing. Then the marker.
        #expect(changeLists.contains { properties($0) == ["metadata.done"] })
        #expect(changeLists.filter { properties($0).contains("metadata.x") }.count == 1)
        // Every event shows the conversation as it is after the whole PATCH.
        for post in posts {
            let participants = (post.json["conversation"] as? [String: Any])?["participants"]
            #expect(Self.users(participants) == ["alice", "carol"])
        }
        await node.stop()
        await receiver.stop()
    }
}
