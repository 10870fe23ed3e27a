import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import Testing

/// Reactions over real HTTP (SPEC §6.9; Lamina extensions of the Server API, the Client API and
/// the webhooks): the Server API reacts on a user's behalf, a Client API user reacts for
/// themself, both show a message's reactions per key, refusals carry their status, and each
/// change of a reaction's presence reaches a webhook as `Message.reactions_changed`.
@Suite struct ReactionAPITests {
    static let thumbs = "\u{1F44D}"
    static let party = "\u{1F389}"

    static func reactions(_ object: [String: Any]) -> [String: [String]] {
        let all = object["reactions"] as? [String: [String: Any]] ?? [:]
        return all.mapValues { ($0["user_ids"] as? [String]) ?? [] }
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func serverAndClientAPIReactAndShowReactionsAndWebhooksHearOfThem(http: CurlAPI.HTTP) async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("reactions-api-\(http)", trusting: receiver)
        let api = CurlAPI(node.server, http: http)
        let webhook = try await WebhookEventNameTests.register(
            api, url: receiver.url("/reactions"), key: "events", names: ["Message.reactions_changed"])
        _ = try await WebhookTests.waitForStatus(api, webhook, "active")

        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"sender":{"user_id":"alice"},"parts":[{"body":"react here","mime_type":"text/plain"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let message = (sent.object["id"] as? String ?? "").replacingOccurrences(of: "layer:///messages/", with: "")
        let path = "/users/bob/messages/\(message)/reactions"

        // The Server API on Bob's behalf; the message shows it (a repeat changes nothing).
        #expect(try await api.request("POST", path, json: #"{"key":"\#(Self.thumbs)"}"#).status == 204)
        #expect(try await api.request("POST", path, json: #"{"key":"\#(Self.thumbs)","action":"add"}"#).status == 204)
        let shown = try await api.request("GET", "/conversations/\(conversation)/messages/\(message)")
        #expect(Self.reactions(shown.object) == [Self.thumbs: ["layer:///identities/bob"]], "\(shown.body)")
        #expect(((shown.object["reactions"] as? [String: [String: Any]])?[Self.thumbs]?["count"] as? Int) == 1)

        // Alice through the Client API; both APIs show both reactions.
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let own = try await alice.request("POST", "/messages/\(message)/reactions", json: #"{"key":"\#(Self.party)"}"#)
        #expect(own.status == 204, "\(own.body)")
        let seen = try await alice.request("GET", "/messages/\(message)")
        #expect(
            Self.reactions(seen.object) == [
                Self.thumbs: ["layer:///identities/bob"], Self.party: ["layer:///identities/alice"],
            ], "\(seen.body)")
        let listed = try await alice.request("GET", "/conversations/\(conversation)/messages")
        let first = (try JSONSerialization.jsonObject(with: Data(listed.body.utf8)) as? [[String: Any]])?.first
        #expect(Self.reactions(first ?? [:]).count == 2, "\(listed.body)")

        // Refusals: a bad key, an unknown action, a user not in the conversation, no such message.
        let empty = try await alice.request("POST", "/messages/\(message)/reactions", json: #"{"key":""}"#)
        #expect(empty.status == 422, "\(empty.body)")
        let control = try await api.request("POST", path, json: #"{"key":"a\u0007"}"#)
        #expect(control.status == 422, "\(control.body)")
        #expect(try await api.request("POST", path, json: #"{"key":"x","action":"toggle"}"#).status == 422)
        let stranger = try await api.request(
            "POST", "/users/carol/messages/\(message)/reactions", json: #"{"key":"\#(Self.thumbs)"}"#)
        #expect(stranger.status == 403, "\(stranger.body)")
        let missing = try await api.request(
            "POST", "/users/bob/messages/\(UUID().uuidString.lowercased())/reactions", json: #"{"key":"x"}"#)
        #expect(missing.status == 404, "\(missing.body)")

        // Bob's reaction taken back.
        #expect(
            try await api.request("POST", path, json: #"{"key":"\#(Self.thumbs)","action":"remove"}"#).status == 204)
        let after = try await api.request("GET", "/conversations/\(conversation)/messages/\(message)")
        #expect(Self.reactions(after.object) == [Self.party: ["layer:///identities/alice"]], "\(after.body)")

        // Three changes of presence, three events (the repeated add gave none).
        let posts = try await receiver.waitForPosts(3, timeout: .seconds(60))
        #expect(posts.count == 3)
        var told: [String] = []
        for post in posts {
            #expect(post.headers["layer-webhook-event-type"] == "Message.reactions_changed")
            let reaction = post.json["reaction"] as? [String: Any] ?? [:]
            let user = (reaction["user_id"] as? String ?? "").replacingOccurrences(of: "layer:///identities/", with: "")
            told.append("\(user) \(reaction["key"] as? String ?? "") \(reaction["present"] as? Bool ?? false)")
            let object = post.json["message"] as? [String: Any] ?? [:]
            #expect((object["id"] as? String)?.hasSuffix(message) == true)
            #expect(object["reactions"] != nil)
        }
        #expect(
            Set(told) == ["bob \(Self.thumbs) true", "alice \(Self.party) true", "bob \(Self.thumbs) false"],
            "\(told)")
        await node.stop()
        await receiver.stop()
    }

    /// The WebSocket tells a reaction as an `update` of the message patching `reactions` with the
    /// (key, user) pair that joined or left (CLIENT-API-WEBSOCKET.md).
    @Test func aSocketGetsEachReactionAsAPatchOfTheMessage() async throws {
        let node = try await TestNode.start("reactions-ws")
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http1)
        let bob = try await ClientAPICurl.session("bob", on: node, http: .http1)
        let created = try await alice.request("POST", "/conversations", json: #"{"participants":["bob"]}"#)
        let conversation = (created.object["id"] as? String ?? "").replacingOccurrences(
            of: "layer:///conversations/", with: "")
        let sent = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"parts":[{"mime_type":"text/plain","body":"react"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let messageID = try #require(sent.object["id"] as? String)
        let message = messageID.replacingOccurrences(of: "layer:///messages/", with: "")

        let packets = ClientAPIWebSocketChangeTests.Packets()
        let socket = try await ClientAPIWebSocketChangeTests.socket(
            of: alice, on: node, onText: { packets.add($0) })

        for action in ["add", "remove"] {
            let reacted = try await bob.request(
                "POST", "/messages/\(message)/reactions", json: #"{"key":"+1","action":"\#(action)"}"#)
            #expect(reacted.status == 204, "\(reacted.body)")
            let update = await packets.change("update", "Message") { body in
                (body["object"] as? [String: Any])?["id"] as? String == messageID
                    && ((body["data"] as? [[String: Any]])?.first?["operation"] as? String) == action
            }
            let patch = (update?["data"] as? [[String: Any]])?.first ?? [:]
            #expect(patch["property"] as? String == "reactions", "\(String(describing: update))")
            let value = patch["value"] as? [String: Any] ?? [:]
            #expect(value["key"] as? String == "+1" && value["user_id"] as? String == "layer:///identities/bob")
        }
        await socket.close()
        await node.stop()
    }
}
