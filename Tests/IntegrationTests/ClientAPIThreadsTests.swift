import Foundation
import LaminaModel
import LaminaNode
import Testing

/// Replies, threads and edits through the Client API and the Server API over real HTTP (curl,
/// HTTP/1.1 and HTTP/2; Lamina extensions): a reply is sent with `reply_to`, messages show
/// `reply_to`, `thread` and `edited_at`, the sender edits with `PATCH /messages/:id` and
/// nobody else may, a reply to a reply is 422, and a webhook gets `Message.edited` with the
/// parts before and after.
@Suite struct ClientAPIThreadsTests {
    static func uuid(_ object: [String: Any], _ prefix: String) -> String {
        (object["id"] as? String ?? "").replacingOccurrences(of: prefix, with: "")
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func repliesThreadsAndEditsOverREST(http: CurlAPI.HTTP) async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("capi-threads-\(http == .http1 ? "h1" : "h2")", trusting: receiver)
        let api = CurlAPI(node.server, http: http)
        let webhook = try await WebhookEventNameTests.register(
            api, url: receiver.url("/edits"), key: "events", names: ["Message.edited"])
        _ = try await WebhookTests.waitForStatus(api, webhook, "active")
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let bob = try await ClientAPICurl.session("bob", on: node, http: http)

        let created = try await alice.request(
            "POST", "/conversations", json: #"{"participants":["bob"],"distinct":false}"#)
        #expect(created.status == 201)
        let conversation = Self.uuid(created.object, "layer:///conversations/")
        let root = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"parts":[{"mime_type":"text/plain","body":"lunch?"}]}"#)
        #expect(root.status == 201)
        let rootID = try #require(root.object["id"] as? String)
        #expect(root.object["reply_to"] == nil && root.object["thread"] == nil && root.object["edited_at"] == nil)

        // Bob replies; the reply names its root, and the root counts it.
        let reply = try await bob.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"reply_to":"\#(rootID)","parts":[{"mime_type":"text/plain","body":"yes"}]}"#)
        #expect(reply.status == 201, "\(reply.body)")
        let replyID = try #require(reply.object["id"] as? String)
        #expect(reply.object["reply_to"] as? String == rootID)
        let rootNow = try await alice.request("GET", "/messages/\(Self.uuid(root.object, "layer:///messages/"))")
        let thread = try #require(rootNow.object["thread"] as? [String: Any])
        #expect(thread["reply_count"] as? Int == 1)
        #expect(thread["last_reply"] as? String == replyID)
        let listed = try await bob.request("GET", "/conversations/\(conversation)/messages")
        #expect(listed.array.first { $0["id"] as? String == replyID }?["reply_to"] as? String == rootID)
        #expect(
            (listed.array.first { $0["id"] as? String == rootID }?["thread"] as? [String: Any])?["reply_count"] as? Int
                == 1)

        // One level deep: a reply to a reply is 422 on reply_to.
        let nested = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"reply_to":"\#(replyID)","parts":[{"mime_type":"text/plain","body":"nested"}]}"#)
        #expect(nested.status == 422, "\(nested.body)")
        #expect((nested.object["data"] as? [String: Any])?["property"] as? String == "reply_to")

        // Bob edits his reply; Alice may not.
        let replyPath = "/messages/\(Self.uuid(reply.object, "layer:///messages/"))"
        let refused = try await alice.request(
            "PATCH", replyPath, json: #"{"parts":[{"mime_type":"text/plain","body":"hijacked"}]}"#)
        #expect(refused.status == 403, "\(refused.body)")
        let edited = try await bob.request(
            "PATCH", replyPath, json: #"{"parts":[{"mime_type":"text/plain","body":"yes, at 12:30"}]}"#)
        #expect(edited.status == 200, "\(edited.body)")
        #expect((edited.object["parts"] as? [[String: Any]])?.first?["body"] as? String == "yes, at 12:30")
        #expect(edited.object["edited_at"] is String)
        #expect(edited.object["reply_to"] as? String == rootID)
        let seen = try await alice.request("GET", replyPath)
        #expect((seen.object["parts"] as? [[String: Any]])?.first?["body"] as? String == "yes, at 12:30")
        #expect(seen.object["edited_at"] as? String == edited.object["edited_at"] as? String)

        // The Server API shows the same, and sends replies too.
        let serverView = try await api.request("GET", "/conversations/\(conversation)/messages")
        #expect(serverView.array.first { $0["id"] as? String == replyID }?["edited_at"] is String)
        let fromBackend = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"sender_id":"layer:///identities/alice","reply_to":"\(rootID)","parts":[{"body":"from the backend","mime_type":"text/plain"}]}
                """)
        #expect(fromBackend.status == 201, "\(fromBackend.body)")
        #expect(fromBackend.object["reply_to"] as? String == rootID)

        // The webhook: Message.edited with the parts before and after.
        let posts = try await receiver.waitForPosts(1)
        let event = try #require(posts.first?.json)
        #expect((event["event"] as? [String: Any])?["type"] as? String == "Message.edited")
        #expect((event["message"] as? [String: Any])?["id"] as? String == replyID)
        let change = try #require((event["changes"] as? [[String: Any]])?.first)
        #expect(change["property"] as? String == "parts")
        #expect(((change["old_value"] as? [[String: Any]])?.first)?["body"] as? String == "yes")
        #expect(((change["new_value"] as? [[String: Any]])?.first)?["body"] as? String == "yes, at 12:30")
        await node.stop()
        await receiver.stop()
    }
}
